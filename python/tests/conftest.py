"""Makes `import fusejit` find python/fusejit when pytest runs from the repo."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
