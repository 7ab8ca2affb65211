"""Demo sources from data that installed packages ship (extra ``medibench[demo-data]``).

:func:`write_demo_sources` writes two sources into a folder:

- ``mni152/SOURCE.yaml``: nilearn's MNI152 2009 T1 template (2 mm) as ``t1.nii.gz`` and a
  tissue label volume ``tissue.nii.gz`` made from nilearn's masks: 1 grey matter, 2 white
  matter, 3 CSF (T1 below 0.35 at least 3 voxels inside the brain mask: the ventricles).
  CSF is the source's lesion, so modification removes and adds ventricles.
- ``liver/SOURCE.yaml``: pydicom-data's liver DICOM SEG (``liver.dcm``, one segment on three
  512x512 frames). pydicom-data does not ship the CT series that SEG was drawn on, so the demo
  pairs it with real CT pixels it does ship: the head CT ``693_UNCR.dcm``, written three times
  with the SOP Instance UIDs the SEG references. The pairing exercises DICOM + SEG reading,
  windowing and the HU operators; the mask is *not* anatomy of that image (the files say so in
  ``ImageComments``).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
from scipy import ndimage

__all__ = ["write_demo_sources"]

_MNI_LICENCE = (
    "ICBM 2009 template licence: free use, copy and distribution with the copyright notice "
    "(C) 1993-2009 Louis Collins, McConnell Brain Imaging Centre, Montreal Neurological "
    "Institute, McGill University"
)


def write_demo_sources(
    folder: str | os.PathLike, *, mni_slices: tuple[int, int] | None = None
) -> dict[str, Path]:
    """Write the demo sources into ``folder``; ``{"mni152": yaml, "liver": yaml}``.

    ``mni_slices = (first, stop)`` keeps only those axial slices of the MNI volumes (small
    test builds).
    """
    root = Path(folder)
    return {"mni152": _mni(root / "mni152", mni_slices), "liver": _liver(root / "liver")}


def _mni(folder: Path, slices: tuple[int, int] | None) -> Path:
    import nibabel as nib

    from medibench.io._mni152 import load_mni152

    folder.mkdir(parents=True, exist_ok=True)
    t1 = nib.as_closest_canonical(load_mni152("template"))
    masks = {
        name: np.asanyarray(nib.as_closest_canonical(load_mni152(f"{name}_mask")).dataobj) > 0.5
        for name in ("brain", "gm", "wm")
    }
    data = np.asanyarray(t1.dataobj).astype(np.float32)
    tissue = np.zeros(t1.shape, np.uint8)
    tissue[masks["wm"]] = 2
    tissue[masks["gm"]] = 1
    # CSF: dark (T1 below 0.35) and 3 voxels or more inside the brain mask, the ventricles
    tissue[ndimage.binary_erosion(masks["brain"], iterations=3) & (data < 0.35)] = 3
    if slices is not None:
        data, tissue = data[:, :, slices[0] : slices[1]], tissue[:, :, slices[0] : slices[1]]
    nib.save(nib.Nifti1Image(data, t1.affine), folder / "t1.nii.gz")
    nib.save(nib.Nifti1Image(tissue, t1.affine), folder / "tissue.nii.gz")
    (folder / "SOURCE.yaml").write_text(
        "name: mni152-brain\n"
        "modality: MRI\n"
        f'licence: "{_MNI_LICENCE}"\n'
        "region: brain\n"
        "items:\n"
        "  - {image: t1.nii.gz, label: tissue.nii.gz, patient: mni152}\n"
        "labels: {1: grey matter, 2: white matter, 3: csf}\n"
        "lesions: [csf]\n"
        "axis: 2\n"
        "intensity: [0.0, 1.0]\n"
        "min_fraction: 0.002\n"
        "split: {by: patient, test: 0.2, seed: 0}\n",
        encoding="utf-8",
    )
    return folder / "SOURCE.yaml"


def _liver(folder: Path) -> Path:
    import pydicom
    from pydicom.data import get_testdata_file
    from pydicom.uid import UID

    seg_path = get_testdata_file("liver.dcm")
    ct_path = get_testdata_file("693_UNCR.dcm")
    if seg_path is None or ct_path is None:
        raise FileNotFoundError("pydicom-data is not installed: pip install 'medibench[demo-data]'")
    images = folder / "ct"
    images.mkdir(parents=True, exist_ok=True)
    seg = pydicom.dcmread(seg_path)
    refs = [
        str(g.DerivationImageSequence[0].SourceImageSequence[0].ReferencedSOPInstanceUID)
        for g in seg.PerFrameFunctionalGroupsSequence
    ]
    series = str(seg.ReferencedSeriesSequence[0].SeriesInstanceUID)
    for number, uid in enumerate(dict.fromkeys(refs), start=1):
        ds = pydicom.dcmread(ct_path)
        ds.SOPInstanceUID = UID(uid)
        ds.file_meta.MediaStorageSOPInstanceUID = UID(uid)
        ds.SeriesInstanceUID = series
        ds.InstanceNumber = number
        ds.ImageComments = (
            "medibench demo: pixels of pydicom-data 693_UNCR.dcm (head CT) under the UID that "
            "pydicom-data's liver.dcm SEG references; the SEG is not anatomy of this image"
        )
        ds.save_as(images / f"ct{number}.dcm")
    shutil.copyfile(seg_path, folder / "liver_seg.dcm")
    (folder / "SOURCE.yaml").write_text(
        "name: pydicom-liver\n"
        "modality: CT\n"
        'licence: "MIT (pydicom-data)"\n'
        "region: abdomen\n"
        "items:\n"
        "  - {image: ct, label: liver_seg.dcm, patient: demo-ct}\n"
        "labels: {1: liver}\n"
        "lesions: [liver]\n"
        "window: [40, 400]\n"
        "min_fraction: 0.01\n"
        "split: {by: patient, test: 0.2, seed: 0}\n",
        encoding="utf-8",
    )
    return folder / "SOURCE.yaml"
