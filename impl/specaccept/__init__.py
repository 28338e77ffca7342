"""specaccept: speculative-decoding acceptance rules as pure, typed MLX functions.

The functional core (sampling, acceptance, rewind, theory) holds every
decision; randomness enters only as explicit uniforms. The generator and the
CLI are a thin shell over it.
"""

from specaccept.acceptance import (
    STOCHASTIC_ACCEPT_ENV,
    AcceptanceRule,
    BlockVerdict,
    Verdict,
    accept_draft_token,
    acceptance_rule,
    residual_distribution,
    residual_resample,
    verify_block,
    verify_draft_token,
)
from specaccept.rewind import RewindPlan, rewind_trim
from specaccept.sampling import (
    SampledToken,
    SamplerConfig,
    effective_token_distribution,
    sample_from_distribution,
    sample_token_with_distribution,
)
from specaccept.theory import (
    ClosedForms,
    acceptance_closed_forms,
    acceptance_probability,
    expected_speedup,
    expected_tokens_per_round,
)

__version__ = "0.1.0"

__all__ = [
    "STOCHASTIC_ACCEPT_ENV",
    "AcceptanceRule",
    "BlockVerdict",
    "ClosedForms",
    "RewindPlan",
    "SampledToken",
    "SamplerConfig",
    "Verdict",
    "accept_draft_token",
    "acceptance_closed_forms",
    "acceptance_probability",
    "acceptance_rule",
    "effective_token_distribution",
    "expected_speedup",
    "expected_tokens_per_round",
    "residual_distribution",
    "residual_resample",
    "rewind_trim",
    "sample_from_distribution",
    "sample_token_with_distribution",
    "verify_block",
    "verify_draft_token",
]
