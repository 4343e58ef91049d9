import threading
import time

from veriloop.training._heartbeat import Heartbeats, read_events


def test_a_stalled_phase_is_reported_with_what_it_was_doing(tmp_path):
    seen = []
    heartbeats = Heartbeats(0.2, tmp_path, on_stall=seen.append)
    stop = threading.Event()

    def busy_phase():  # keeps beating: never reported
        while not stop.is_set():
            heartbeats.beat("train", "step 3: micro-batch")
            time.sleep(0.02)

    worker = threading.Thread(target=busy_phase)
    worker.start()
    heartbeats.beat("rollout", "step 3, round 1: 4 prompts x 8 samples, 5/32 episodes done")
    heartbeats.beat("checkpoint", "step 2: saving")
    heartbeats.idle("checkpoint")  # finished: never reported
    time.sleep(0.8)
    stop.set()
    worker.join()
    heartbeats.close()
    assert [(s.phase, s.doing) for s in seen] == [
        ("rollout", "step 3, round 1: 4 prompts x 8 samples, 5/32 episodes done")
    ]
    assert seen[0].quiet_s >= 0.2
    events = read_events(tmp_path)
    assert [(e["event"], e["phase"]) for e in events] == [("stall", "rollout")]  # once per stall


def test_a_new_beat_rearms_the_report(tmp_path):
    heartbeats = Heartbeats(60, tmp_path)
    heartbeats.close()  # drive it by hand: no watchdog timing involved
    heartbeats.stall_after_s = 0.0
    heartbeats.beat("rollout", "round 1")
    assert [s.doing for s in heartbeats.check()] == ["round 1"]
    assert heartbeats.check() == []
    heartbeats.beat("rollout", "round 2")
    assert [s.doing for s in heartbeats.check()] == ["round 2"]
