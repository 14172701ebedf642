"""``python -m loops.cpg``: relearn the shipped patterns from their reference cycles and rewrite ``loops/cpg/data``."""
from .learning import build_reference_pattern
from .patterns import DATA_DIR, SHIPPED_PATTERNS, save_pattern

for name in SHIPPED_PATTERNS:
    pattern = build_reference_pattern(name)
    rms, peak = pattern.fit_error()
    print(f"{save_pattern(pattern, DATA_DIR / f'{name}.json')}: {pattern.frequency:.6f} Hz, "
          f"fit error rms {rms.max():.2e} m, max {peak.max():.2e} m")
