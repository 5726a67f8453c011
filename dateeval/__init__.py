"""dateeval: measure how benchmark results move when only the date in the system prompt changes."""

import os

# Run-to-run reproducibility on CPU (paper App. C.2): by default MKL may use fewer threads when the machine
# is busy and pick code paths by memory alignment, either of which changes summation order and so the last
# bits of the logits. Fixed threads and MKL's conditional numerical reproducibility remove both. Set here,
# before torch (imported lazily by the backend) loads MKL; a user's own settings win.
os.environ.setdefault("MKL_DYNAMIC", "FALSE")
os.environ.setdefault("MKL_CBWR", "AUTO")

__version__ = "0.1.0"
