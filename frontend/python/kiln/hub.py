"""kiln.hub (torch.hub): where downloaded checkpoints live and fetching a state dict by URL.

Model libraries import it at the top (torchvision, timm: `load_state_dict_from_url`,
`download_url_to_file`, `get_dir`). Downloads go to $TORCH_HOME/hub/checkpoints (TORCH_HOME
defaults to $XDG_CACHE_HOME/torch, i.e. ~/.cache/torch, as PyTorch's, so files PyTorch fetched
are found again) and are loaded with kiln.load. Loading a GitHub repository's hubconf.py
(hub.load / list / help) is not implemented."""
import hashlib
import os
import re
import shutil
import tempfile
from urllib.parse import urlparse  # noqa: F401  (torch.hub exports it; timm imports it from here)
from urllib.request import Request, urlopen

__all__ = ["download_url_to_file", "get_dir", "help", "list", "load", "load_state_dict_from_url", "set_dir"]

# A file name ending in -<sha256 prefix>.<ext> (torchvision's checkpoints): check_hash compares it.
HASH_REGEX = re.compile(r"-([a-f0-9]*)\.")
_hub_dir = None


def _get_torch_home():
    return os.path.expanduser(os.getenv("TORCH_HOME", os.path.join(os.getenv("XDG_CACHE_HOME", "~/.cache"), "torch")))


def get_dir():
    """The hub directory: set_dir's, else $TORCH_HUB, else $TORCH_HOME/hub."""
    if _hub_dir is not None:
        return _hub_dir
    return os.path.expanduser(os.getenv("TORCH_HUB", os.path.join(_get_torch_home(), "hub")))


def set_dir(d):
    global _hub_dir
    _hub_dir = os.path.expanduser(d)


def download_url_to_file(url, dst, hash_prefix=None, progress=True):
    """Downloads url to dst (through a temporary file in dst's directory, renamed at the end);
    with hash_prefix, the SHA-256 of the content must start with it (RuntimeError otherwise)."""
    dst = os.path.expanduser(dst)
    folder = os.path.dirname(dst) or "."
    os.makedirs(folder, exist_ok=True)
    digest = hashlib.sha256() if hash_prefix else None
    with tempfile.NamedTemporaryFile(delete=False, dir=folder) as tmp:
        try:
            with urlopen(Request(url, headers={"User-Agent": "kiln.hub"})) as response:
                while True:
                    chunk = response.read(1 << 16)
                    if not chunk:
                        break
                    tmp.write(chunk)
                    if digest is not None:
                        digest.update(chunk)
            tmp.close()
            if digest is not None and not digest.hexdigest().startswith(hash_prefix):
                raise RuntimeError(f'invalid hash value (expected "{hash_prefix}", got "{digest.hexdigest()}")')
            shutil.move(tmp.name, dst)
        finally:
            if os.path.exists(tmp.name):
                os.remove(tmp.name)


def load_state_dict_from_url(url, model_dir=None, map_location=None, progress=True, check_hash=False,
                             file_name=None, weights_only=False):
    """The state dict at url, downloaded once into model_dir (default get_dir()/checkpoints) and
    read with kiln.load."""
    from .serialization import load
    model_dir = model_dir or os.path.join(get_dir(), "checkpoints")
    os.makedirs(model_dir, exist_ok=True)
    filename = file_name or os.path.basename(urlparse(url).path)
    cached = os.path.join(model_dir, filename)
    if not os.path.exists(cached):
        match = HASH_REGEX.search(filename) if check_hash else None
        download_url_to_file(url, cached, match.group(1) if match else None, progress=progress)
    return load(cached, map_location=map_location, weights_only=weights_only)


def _not_built(name):
    def fn(*args, **kwargs):
        raise NotImplementedError(f"kiln.hub.{name}: loading a repository's hubconf.py is not implemented; "
                                  "import the model's code and use load_state_dict_from_url for its weights")
    fn.__name__ = name
    return fn


load, list, help = _not_built("load"), _not_built("list"), _not_built("help")  # noqa: A001
