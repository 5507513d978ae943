"""`python -m tapeviz.worker`: how the runner starts a worker process (see serve.py)."""
import sys

from .serve import main

sys.exit(main())
