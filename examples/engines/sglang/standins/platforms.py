"""The project's stand-in for ``sglang.srt.platforms``: no platform is resolved."""

current_platform = None
