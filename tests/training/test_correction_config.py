"""``algorithm.correction``: its spellings, its checks, and the older ``pipeline.stale_correction``."""

import pytest

from veriloop.core import UserError
from veriloop.training import load_config


def test_a_correction_is_set_field_by_field_or_by_its_mode_alone():
    config = load_config(None, ["algorithm.correction.mode=token_mask", "algorithm.correction.low=0.4"])
    assert (config.algorithm.correction.mode, config.algorithm.correction.low) == ("token_mask", 0.4)
    assert load_config(None, ["algorithm.correction=sequence_tis"]).algorithm.correction.mode == "sequence_tis"
    assert load_config(None).algorithm.correction.mode == "none"


@pytest.mark.parametrize(
    "override, message",
    [
        ("algorithm.correction.mode=tis", "known: none, sequence_mask, sequence_tis, token_mask, token_tis"),
        ("algorithm.correction.cap=1", "algorithm.correction.cap"),
        ("algorithm.correction.low=1.5", "algorithm.correction.low"),
        ("algorithm.correction.bogus=1", "algorithm.correction.bogus"),
        ("algorithm.correction.mode.deeper=1", "use SECTION.FIELD=VALUE"),
    ],
)
def test_a_bad_correction_is_refused_by_name(override, message):
    with pytest.raises(UserError) as error:
        load_config(None, [override])
    assert message in str(error.value)


def test_the_decoupled_stale_correction_is_token_tis_capped_at_is_cap():
    config = load_config(None, ["pipeline.stale_correction=decoupled", "pipeline.is_cap=3"])
    assert (config.algorithm.correction.mode, config.algorithm.correction.cap) == ("token_tis", 3.0)
    chosen = load_config(None, ["pipeline.stale_correction=decoupled", "algorithm.correction=sequence_mask"])
    assert chosen.algorithm.correction.mode == "sequence_mask"
    with pytest.raises(UserError, match="drop pipeline.stale_correction"):
        load_config(None, ["pipeline.stale_correction=decoupled", "algorithm.correction.mode=none"])
    saved = load_config(None, ["pipeline.stale_correction=decoupled"]).model_dump(mode="json")
    from veriloop.training import TrainConfig

    assert TrainConfig.model_validate(saved).algorithm.correction.mode == "token_tis"  # a saved run reloads


def test_a_resume_names_a_changed_correction_field_by_its_dotted_name(tmp_path):
    from veriloop.training._run_config import check_and_save_run_config

    check_and_save_run_config(tmp_path, load_config(None, ["algorithm.correction.mode=token_tis"]), resuming=False)
    changed = load_config(None, ["algorithm.correction.mode=token_mask"])
    with pytest.raises(UserError, match="algorithm.correction.mode: 'token_tis' -> 'token_mask'"):
        check_and_save_run_config(tmp_path, changed, resuming=True)
    allowed = load_config(
        None, ["algorithm.correction.mode=token_mask", "run.resume_changes=[algorithm.correction.mode]"]
    )
    check_and_save_run_config(tmp_path, allowed, resuming=True)
