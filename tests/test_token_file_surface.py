"""The operator's control token cannot be swapped by another user of the control PC (issue: the PC is shared).

The attack: the operator (root) keeps the token file, 0600 and theirs, in a directory another user can write.
That user (uid 65534) cannot read the token, but can replace the file by a symbolic link to a file of the
operator's whose first line they know; a server or ``rtctl control`` that follows the link takes that line as
the token, and the attacker then commands every run. The directory is checked, and the file is opened once,
without following a link, and checked on what was opened.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from other_user import as_other_user
from rtctl.operator.auth import CredentialError, read_token_file, write_private

TOKEN = "operator-token-0123456789abcdef"
KNOWN = "a-line-the-attacker-knows-0123456789"   # the first line of some file of the operator's


def swap_for_a_link(token: str, target: str) -> bool:
    """As another user: can the token be read (no); then replace it by a link to ``target``."""
    try:
        open(token).close()
        return True
    except PermissionError:
        os.unlink(token)
        os.symlink(target, token)
        return False


@pytest.fixture
def reachable():
    """A directory of the operator's that other users may pass through (pytest's tmp_path is private)."""
    path = Path(tempfile.mkdtemp(prefix="rtctl-shared-"))
    path.chmod(0o711)
    try:
        yield path
    finally:
        shutil.rmtree(path)


def test_a_token_in_a_directory_others_can_write_is_refused_so_it_cannot_be_swapped(reachable):
    shared = reachable / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    token, known = shared / "control.token", reachable / "notes.txt"
    token.write_text(TOKEN + "\n")
    token.chmod(0o600)
    known.write_text(KNOWN + "\n")
    known.chmod(0o600)
    with pytest.raises(CredentialError, match="writable by other users"):   # refused before any swap
        read_token_file(token)
    assert as_other_user(swap_for_a_link, str(token), str(known)) is False
    with pytest.raises(CredentialError) as err:         # after it: not the line the attacker knows
        read_token_file(token)
    assert str(err.value) == (f"token file {token}: its directory {shared} is writable by other users (mode 0777), "
                              f"who could replace the file; run: chmod go-w {shared} (or keep the token in a "
                              f"directory of your own)")
    shared.chmod(0o755)
    with pytest.raises(CredentialError) as err:
        read_token_file(token)
    assert str(err.value) == (f"token file {token}: a symbolic link (it can be pointed at another file); "
                              f"give the file itself")


def test_a_token_file_that_is_a_link_is_refused_even_in_a_private_directory(tmp_path):
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    real = private / "real.token"
    real.write_text(TOKEN + "\n")
    real.chmod(0o600)
    (private / "control.token").symlink_to(real)
    assert read_token_file(real) == TOKEN
    with pytest.raises(CredentialError, match="a symbolic link"):
        read_token_file(private / "control.token")


def test_a_token_directory_that_others_can_read_is_told_to_chmod_700_not_600(tmp_path):
    config = tmp_path / "config"
    config.mkdir(mode=0o755)
    with pytest.raises(CredentialError) as err:
        write_private(config / "control.token", TOKEN + "\n")
    assert str(err.value) == f"directory {config}: mode 0755 lets other users read it; run: chmod 700 {config}"


def test_a_fifo_in_place_of_the_token_is_refused_without_waiting_for_a_writer(tmp_path):
    fifo = tmp_path / "control.token"
    os.mkfifo(fifo, 0o600)
    with pytest.raises(CredentialError, match="not a regular file"):
        read_token_file(fifo)
