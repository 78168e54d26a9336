from sagc import FixedGroupSize, SAGCConfig, SAGCController
from sagc.demo import main, simulate


def test_demo_sagc_straggles_less_than_the_largest_g_and_moves_down():
    sagc = simulate(SAGCController(SAGCConfig(seed=0)), 400, 8, seed=0)
    g16 = simulate(FixedGroupSize(16), 400, 8, seed=0)
    rate = lambda recs: sum(r.straggler for r in recs) / len(recs)  # noqa: E731
    assert rate(sagc) < rate(g16)
    late = [r.group_size for r in sagc[300:]]
    assert sum(late) / len(late) < 10, "as the tail grows the controller should leave G=16"


def test_demo_prints_its_tables(capsys):
    main(["--steps", "100", "--window", "50"])
    out = capsys.readouterr().out
    for row in ("sagc", "g4", "g8", "g16", "budget delta = 0.3"):
        assert row in out


def test_demo_runs_the_options(capsys):
    main(["--steps", "60", "--window", "30", "--counterfactual", "--selection", "constrained"])
    out = capsys.readouterr().out
    assert "counterfactual=True, selection=constrained" in out
