"""`python -m faultline ...` is the `faultline` command: `python -m faultline
run train.py` runs the job with the library preloaded, `python -m faultline
show REPORT.json` renders a report, and so on (see `faultline --help`)."""
import sys

from ._launcher import main

if __name__ == "__main__":
    sys.exit(main())
