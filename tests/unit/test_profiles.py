"""Device profiles: bundled ones load; broken ones fail in one line naming field and value."""

import json
import re

import pytest

from moesim.config.device import GPUServerProfile, MobileNPUProfile
from moesim.config.profiles import list_profiles, load_profile, profile_hash
from moesim.config.sections import Section, numeric_fields
from moesim.errors import InputError, NotFittedError
from moesim.units import unit_of


def test_bundled_profiles() -> None:
    names = [p.name for p in list_profiles()]
    assert names == ["b200x8-fused", "h100x8-fused", "h100x8-hf", "h200x8-fused", "h200x8-hf", "h20x8-fused",
                     "h20x8-hf", "host", "sd8-elite", "sd8-elite-gen5", "sd8-gen3"]
    phone = load_profile("sd8-elite-gen5")
    assert isinstance(phone, MobileNPUProfile)
    assert phone.htp.vtcm_MiB == 8.0 and phone.ufs.version == "4.1"
    hf, fused = load_profile("h200x8-hf"), load_profile("h200x8-fused")
    assert isinstance(hf, GPUServerProfile) and isinstance(fused, GPUServerProfile)
    assert hf.gpu == fused.gpu                      # same hardware ...
    assert hf.runtime.kind != fused.runtime.kind    # ... different runtime


def test_every_schema_number_has_a_unit_suffix() -> None:
    for cls in {type(s) for p in list_profiles() for s in p.sections().values()}:
        for name in numeric_fields(cls):
            assert unit_of(name), f"{cls.__name__}.{name}"


def test_every_bundled_number_has_provenance() -> None:
    for p in list_profiles():
        for sec in p.sections().values():
            for name in numeric_fields(type(sec)):
                if getattr(sec, name) is not None:
                    assert sec.provenance[name].split(":")[0] in {
                        "spec", "paper", "measured", "fitted", "derived", "assumed"}


def _without_value(text: str, field: str) -> str:
    """The profile text with ``field``'s value line removed (its provenance note kept)."""
    return re.sub(rf"^{field} = [0-9.]+\n", "", text, count=1, flags=re.M)


def test_pending_numbers_raise_instead_of_defaulting(write_profile, phone_profile_text) -> None:  # type: ignore[no-untyped-def]
    phone = load_profile(write_profile(_without_value(phone_profile_text, "hmx_fp16_TFLOPS")))
    assert isinstance(phone, MobileNPUProfile)
    assert "hmx_fp16_TFLOPS" in phone.htp.pending()
    with pytest.raises(NotFittedError, match="hmx_fp16_TFLOPS"):
        phone.htp.require("hmx_fp16_TFLOPS", phone.name)
    assert phone.ufs.require("peak_read_bw_GBps") == 4.3


def test_profile_hash_is_stable_and_sensitive(write_profile, phone_profile_text) -> None:  # type: ignore[no-untyped-def]
    a = load_profile(write_profile(phone_profile_text))
    b = load_profile(write_profile(phone_profile_text, "copy.toml"))
    assert profile_hash(a) == profile_hash(b) != profile_hash(load_profile("sd8-elite-gen5"))   # the name counts
    c = load_profile(write_profile(phone_profile_text.replace("peak_read_bw_GBps = 4.3", "peak_read_bw_GBps = 4.4")))
    assert profile_hash(c) != profile_hash(a)


BROKEN = [
    # (replace this, with this, message must contain)
    ("peak_read_bw_GBps = 4.3", "peak_read_bw_GBps = -4.3",
     "ufs.peak_read_bw_GBps must be greater than 0, got -4.3"),
    ("vtcm_MiB = 8.0", "vtcm_MiB = 8.0\nvtcm_size_MiB = 8.0",
     "htp.vtcm_size_MiB is not a known field"),
    ("peak_read_bw_GBps = 4.3", "peak_read_bw = 4.3",
     "ufs.peak_read_bw is a number without a unit suffix"),
    ('peak_read_bw_GBps = "spec:', 'peak_read_bw_GBps = "from a blog:',
     "ufs.provenance.peak_read_bw_GBps must start with one of"),
    ('hvx_vector_B = "spec: HVX 128-byte vectors (BRIEF.md section 3)"\n', "",
     "htp.provenance.hvx_vector_B is required"),
    ("default_queue_depth_count = 2", "default_queue_depth_count = 64",
     "ufs.default_queue_depth_count must be <= queue_slots_count (32), got 64"),
    ("usable_GiB = 15.1", "usable_GiB = 17.0", "memory.usable_GiB must be <= capacity_GiB (16.0), got 17.0"),
    ("max_mapped_GiB = 3.5", "max_mapped_GiB = 15.5",
     "arena.max_mapped_GiB must be <= memory.usable_GiB (15.1), got 15.5"),
    ('kind = "mobile-npu"', 'kind = "toaster"', "kind"),
    ("queue_slots_count = 32", "queue_slots_count = 3.5", "ufs.queue_slots_count"),
    ("vtcm_MiB = 8.0", 'vtcm_MiB = "eight"', "htp.vtcm_MiB must be a valid number"),
    ("[ufs]", "[ufs", "TOML is malformed"),
]


@pytest.mark.parametrize(("old", "new", "message"), BROKEN)
def test_broken_profile_one_line_exit_2(run_cli, write_profile, phone_profile_text, old, new, message) -> None:  # type: ignore[no-untyped-def]
    assert old in phone_profile_text
    path = write_profile(phone_profile_text.replace(old, new, 1))
    res = run_cli("devices", "--device", str(path))
    assert res.code == 2
    assert res.out == ""
    assert res.err.count("\n") == 1, res.err
    assert "Traceback" not in res.err
    assert message in res.err
    assert str(path) in res.err


def test_broken_profile_from_python_raises_input_error(write_profile, phone_profile_text) -> None:  # type: ignore[no-untyped-def]
    path = write_profile(phone_profile_text.replace("peak_bw_GBps = 84.8", "peak_bw_GBps = 0"))
    with pytest.raises(InputError, match=re.escape("memory.peak_bw_GBps must be greater than 0, got 0")):
        load_profile(path)


def test_cross_field_gpu(write_profile) -> None:  # type: ignore[no-untyped-def]
    from moesim.config.profiles import profile_dir

    text = (profile_dir() / "h200x8-hf.toml").read_text()
    path = write_profile(text.replace("hbm_measured_read_bw_TBps = 2.76", "hbm_measured_read_bw_TBps = 5.0"))
    with pytest.raises(InputError, match=r"gpu.hbm_measured_read_bw_TBps must be <= hbm_peak_bw_TBps \(4.8\), got 5.0"):
        load_profile(path)


def test_user_profile_shows(run_cli, write_profile, phone_profile_text) -> None:  # type: ignore[no-untyped-def]
    path = write_profile(_without_value(phone_profile_text, "hmx_fp16_TFLOPS")
                         .replace('name = "sd8-elite-gen5"', 'name = "my-phone"')
                         .replace("peak_read_bw_GBps = 4.3", "peak_read_bw_GBps = 4.4"))
    res = run_cli("devices", "--device", str(path), "--json")
    assert res.code == 0, res.err
    record = json.loads(res.out)["devices"][0]
    assert record["name"] == "my-phone" and record["ufs"]["peak_read_bw_GBps"] == 4.4
    assert "htp.hmx_fp16_TFLOPS" in record["pending_fit"]
    human = run_cli("devices", "--device", str(path))
    assert "ufs.peak_read_bw_GBps" in human.out and "(pending fit)" in human.out


def test_unknown_device_name(run_cli) -> None:  # type: ignore[no-untyped-def]
    res = run_cli("devices", "--device", "sd9")
    assert res.code == 2 and "device must be a bundled profile" in res.err and "'sd9'" in res.err


def test_section_base_is_abstract_enough() -> None:
    assert numeric_fields(Section) == []
