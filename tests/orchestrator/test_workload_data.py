"""A workload and its data must match, before Ray starts: volumes need unet3d, unet3d needs
volumes."""

from __future__ import annotations

import pytest

from orchestrator import SearchSpec
from orchestrator.cli import main
from tests.volumes import write_volume_folder


def test_volume_folder_needs_the_unet3d_workload(tmp_path, tiny_npz):
    folder = write_volume_folder(tmp_path / "vols", count=2, size=16)
    with pytest.raises(ValueError, match="--workload unet3d"):
        SearchSpec(data=str(folder))
    with pytest.raises(ValueError, match="must be a folder with images/ and labels/"):
        SearchSpec(workload="unet3d", data=tiny_npz)
    SearchSpec(workload="unet3d", data=str(folder))  # the right pair is accepted


def test_cli_says_so_in_one_line(tmp_path, capsys, in_tmp):
    folder = write_volume_folder(tmp_path / "vols", count=2, size=16)
    assert main(["search", "--data", str(folder)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "add --workload unet3d" in err[0]
