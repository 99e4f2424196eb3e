//! The compact columns held to a sorted map's answer, wall times to their records'.

use super::*;

#[test]
fn columns_stay_in_step_order_and_keep_the_first_value_of_a_step() {
    let mut c = ScalarColumns::default();
    c.add(
        vec![(
            "loss".into(),
            Mode::Train,
            vec![(0, 1.0, 100.0), (2, 3.0, 102.0)],
        )],
        10,
    );
    c.add(
        vec![
            (
                "loss".into(),
                Mode::Train,
                vec![(2, 9.0, 109.0), (1, 2.0, 101.5), (4, 5.0, 104.25)],
            ),
            ("loss".into(), Mode::Eval, vec![(3, 7.0, 99.0)]),
        ],
        0,
    );
    let track = c.get("loss").unwrap();
    let train = &track[&Mode::Train];
    let points: Vec<_> = train.points().collect();
    assert_eq!(points, [(0, 1.0), (1, 2.0), (2, 3.0), (4, 5.0)]);
    let walls: Vec<f64> = [0, 1, 2, 4]
        .map(|step| c.wall_time_at(train, step).unwrap())
        .to_vec();
    assert_eq!(walls, [100.0, 101.5, 102.0, 104.25]);
    assert_eq!(c.wall_time_at(train, 3), None, "step 3 is eval's");
    assert_eq!(c.wall_time_at(&track[&Mode::Eval], 3), Some(99.0));
    assert_eq!(track[&Mode::Eval].points().collect::<Vec<_>>(), [(3, 7.0)]);
    assert_eq!(c.values(), 5);
    assert_eq!(c.first_wall_time(), Some(99.0));
    assert!(c.get("acc").is_none());
}

#[test]
fn a_value_is_given_its_steps_wall_time_within_4_ms_and_its_own_beyond() {
    let mut c = ScalarColumns::default();
    let start = 1.79e9;
    // Three tensors a step, saved 1 ms apart; `late` a second after the others at every
    // tenth step.
    let column = |offset: f64, late: bool| -> BatchColumn {
        (0..1000u64)
            .map(|i| {
                let apart = if late && i % 10 == 0 { 1.0 } else { 0.0 };
                let wall = start + i as f64 * 86.4 + offset + apart;
                (i, i as f64, wall)
            })
            .collect()
    };
    let (loss, acc, late) = (
        column(0.0, false),
        column(0.001, false),
        column(0.002, true),
    );
    c.add(
        vec![
            ("loss".into(), Mode::Train, loss.clone()),
            ("acc".into(), Mode::Train, acc.clone()),
            ("late".into(), Mode::Train, late.clone()),
        ],
        0,
    );
    for (name, points) in [("loss", &loss), ("acc", &acc), ("late", &late)] {
        let column = &c.get(name).unwrap()[&Mode::Train];
        for &(step, _, wall) in points {
            let got = c.wall_time_at(column, step).unwrap();
            assert!(
                (got - wall).abs() <= WALL_TOLERANCE_S,
                "{name} {step}: {got} for {wall}"
            );
            if step % 10 == 0 && name == "late" {
                assert_eq!(got, wall, "a second apart: its own");
            } else {
                assert_eq!(
                    got, loss[step as usize].2,
                    "the step's: loss's, handed in first"
                );
            }
        }
    }
    // `i as f64` is an f32 exactly: 4 bytes a value, one run of steps; the wall times are
    // 8 bytes a step, and `late` keeps 100 of its own.
    let late = &c.get("late").unwrap()[&Mode::Train];
    assert_eq!(late.walls_apart.len(), 100);
    let loss = &c.get("loss").unwrap()[&Mode::Train];
    assert_eq!(loss.steps.run_count(), 1);
    assert_eq!(loss.heap_bytes() - loss.steps.heap_bytes(), 1000 * 4);
    assert_eq!(c.walls.walls.len(), 1000);
}

#[test]
fn a_column_built_in_any_order_holds_what_a_sorted_map_holds() {
    for seed in 1..40u64 {
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut model: BTreeMap<u64, (f64, f64)> = BTreeMap::new();
        let mut c = ScalarColumns::default();
        // Steps: stretches of strides 1, 3 and 10 with gaps, some late, some repeated.
        let mut steps: Vec<u64> = Vec::new();
        let mut at = rng.u64(..) % 5;
        for _ in 0..(2 + rng.u64(..) % 6) {
            let stride = [1, 3, 10][(rng.u64(..) % 3) as usize];
            for _ in 0..(1 + rng.u64(..) % 40) {
                steps.push(at);
                at += stride;
            }
            at += rng.u64(..) % 50;
        }
        for _ in 0..steps.len() / 3 {
            let (a, b) = (
                rng.u64(..) as usize % steps.len(),
                rng.u64(..) as usize % steps.len(),
            );
            steps.swap(a, b);
        }
        let repeats: Vec<u64> = steps.iter().step_by(7).copied().collect();
        steps.extend(repeats);
        for step in steps {
            let value = if rng.u64(..).is_multiple_of(5) {
                step as f64 * 0.1 // not an f32
            } else {
                step as f64 + 0.5
            };
            // A repeat's record is another one: its wall time is later.
            let wall = 1.7e9 + step as f64 + if model.contains_key(&step) { 0.5 } else { 0.0 };
            let before = c.values();
            c.add(
                vec![("x".into(), Mode::Train, vec![(step, value, wall)])],
                0,
            );
            let new = c.values() > before;
            assert_eq!(new, !model.contains_key(&step), "seed {seed} step {step}");
            model.entry(step).or_insert((value, wall));
        }
        let column = &c.get("x").unwrap()[&Mode::Train];
        let want: Vec<(u64, f64)> = model.iter().map(|(&s, &(v, _))| (s, v)).collect();
        assert_eq!(column.points().collect::<Vec<_>>(), want, "seed {seed}");
        assert_eq!(column.points().next_back(), want.last().copied());
        assert_eq!(column.last(), want.last().copied());
        for probe in 0..at + 3 {
            let held = model.get(&probe).map(|&(_, w)| w);
            assert_eq!(
                c.wall_time_at(column, probe),
                held,
                "seed {seed} step {probe}"
            );
        }
        for (from, to) in [(None, None), (Some(3.0), Some(40.5)), (Some(17.0), None)] {
            let window: Vec<_> = want
                .iter()
                .filter(|p| from.is_none_or(|f| p.0 as f64 >= f))
                .filter(|p| to.is_none_or(|t| p.0 as f64 <= t))
                .copied()
                .collect();
            assert_eq!(column.window(from, to), window, "seed {seed}");
        }
    }
}

#[test]
fn values_widen_to_f64_at_the_first_that_is_not_an_f32_and_steps_stay_runs() {
    let mut c = ScalarColumns::default();
    let narrow: BatchColumn = (0..100u64)
        .map(|i| (i * 10, 0.25 * i as f64, 5.0))
        .collect();
    c.add(vec![("loss".into(), Mode::Train, narrow)], 0);
    let column = &c.get("loss").unwrap()[&Mode::Train];
    assert_eq!(column.heap_bytes() - column.steps.heap_bytes(), 100 * 4);
    c.add(
        vec![(
            "loss".into(),
            Mode::Train,
            vec![(1000, 0.1, 6.0), (1010, f64::NAN, 7.0)],
        )],
        0,
    );
    let column = &c.get("loss").unwrap()[&Mode::Train];
    let points: Vec<_> = column.points().collect();
    assert_eq!(points.len(), 102);
    assert_eq!(points[100], (1000, 0.1), "0.1 kept as the f64 it is");
    assert!(points[101].1.is_nan());
    for (i, p) in points[..100].iter().enumerate() {
        assert_eq!(*p, (i as u64 * 10, 0.25 * i as f64));
    }
    // Steps 0, 10, ..., 1010: one run still.
    assert_eq!(column.steps.run_count(), 1);
    assert!(column.heap_bytes() - column.steps.heap_bytes() <= (102 + 102 / 8 + 16) * 8);
}
