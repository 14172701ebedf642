import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(params=["xml-string", "file"])
def load_error(request, tmp_path):
    """Load a malformed URDF from a string or a file; return the ModelError message (for a file, naming it)."""
    from rtctl.model import ModelError
    from rtctl.model.urdf import load_urdf

    def load(urdf: str) -> str:
        if request.param == "xml-string":
            with pytest.raises(ModelError) as info:
                load_urdf(urdf)
            return str(info.value)
        path = tmp_path / "malformed.urdf"
        path.write_text(urdf, encoding="utf-8")
        with pytest.raises(ModelError) as info:
            load_urdf(path)
        assert str(path) in str(info.value)
        return str(info.value)

    return load
