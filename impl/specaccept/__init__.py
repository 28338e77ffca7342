"""specaccept: speculative-decoding acceptance rules as pure, typed MLX functions.

Three layers, one subpackage each: `specaccept.core` (the sampler's settings, chain and
penalties, acceptance, rewind, theory, randomness, validation) holds every decision, with
randomness entering only as explicit uniforms; `specaccept.shell` (the generator, model
loading) is the thin imperative shell over it; `specaccept.cli` is the `specaccept`
command. The public API is re-exported here.
"""

from typing import TYPE_CHECKING

from specaccept.core import deprecated_names
from specaccept.core.acceptance import (
    AcceptanceRule,
    TokenwiseVerdict,
    Verdict,
    accept_draft_token,
    acceptance_rule,
    residual_distribution,
    residual_resample,
    verify_draft_token,
    verify_tokenwise,
)
from specaccept.core.batch import BatchVerdict, batch_uniforms, verify_batch
from specaccept.core.draw_law import UNIFORM_GRID_SIZE, grid_draw_counts
from specaccept.core.joint import BlockwiseVerdict, verify_blockwise
from specaccept.core.rewind import RewindPlan, rewind_trim
from specaccept.core.sampler_config import SamplerConfig
from specaccept.core.sampling import (
    SampledToken,
    effective_token_distribution,
    sample_from_distribution,
    sample_token_with_distribution,
)
from specaccept.core.theory import (
    ClosedForms,
    acceptance_closed_forms,
    acceptance_probability,
    expected_speedup,
    expected_tokens_per_round,
)
from specaccept.core.tree import (
    TreeScheme,
    TreeVerdict,
    candidate_siblings_acceptance,
    iid_siblings_acceptance,
    multi_draft_ceiling,
    verify_tree,
    without_replacement_siblings_acceptance,
)
from specaccept.shell.caches import CacheInvariantError
from specaccept.shell.generator import (
    RoundObservation,
    RuleChoice,
    SpeculativeGenerator,
    SpeculativeRun,
)
from specaccept.shell.guards import NonFiniteLogitsError
from specaccept.shell.loading import MissingExtraError, ModelPair, load_model, load_pair
from specaccept.shell.rule_choice import BLOCK_VERIFY_ENV, STOCHASTIC_ACCEPT_ENV
from specaccept.shell.stats import SpeculativeStats
from specaccept.shell.target_only import target_only_generate

__version__ = "0.2.0"

__all__ = [
    "BLOCK_VERIFY_ENV",
    "STOCHASTIC_ACCEPT_ENV",
    "UNIFORM_GRID_SIZE",
    "AcceptanceRule",
    "BatchVerdict",
    "BlockwiseVerdict",
    "CacheInvariantError",
    "ClosedForms",
    "MissingExtraError",
    "ModelPair",
    "NonFiniteLogitsError",
    "RewindPlan",
    "RoundObservation",
    "RuleChoice",
    "SampledToken",
    "SamplerConfig",
    "SpeculativeGenerator",
    "SpeculativeRun",
    "SpeculativeStats",
    "TokenwiseVerdict",
    "TreeScheme",
    "TreeVerdict",
    "Verdict",
    "accept_draft_token",
    "acceptance_closed_forms",
    "acceptance_probability",
    "acceptance_rule",
    "batch_uniforms",
    "candidate_siblings_acceptance",
    "effective_token_distribution",
    "expected_speedup",
    "expected_tokens_per_round",
    "grid_draw_counts",
    "iid_siblings_acceptance",
    "load_model",
    "load_pair",
    "multi_draft_ceiling",
    "residual_distribution",
    "residual_resample",
    "rewind_trim",
    "sample_from_distribution",
    "sample_token_with_distribution",
    "target_only_generate",
    "verify_batch",
    "verify_blockwise",
    "verify_draft_token",
    "verify_tokenwise",
    "verify_tree",
    "without_replacement_siblings_acceptance",
]


# The names these verdicts had up to 0.2, when `verify_tokenwise` returned a "BlockVerdict"
# and `verify_blockwise` a "JointVerdict": kept, with a DeprecationWarning, for one release.
if TYPE_CHECKING:
    BlockVerdict = TokenwiseVerdict
    JointVerdict = BlockwiseVerdict
else:
    __getattr__ = deprecated_names(
        __name__, globals(),
        {"BlockVerdict": "TokenwiseVerdict", "JointVerdict": "BlockwiseVerdict"})
