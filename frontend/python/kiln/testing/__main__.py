"""`python -m kiln.testing`: sample counts and supported dtypes per op, and the ops without samples."""
from .samples import main

main()
