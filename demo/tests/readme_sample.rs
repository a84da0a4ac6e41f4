//! The README's sample output of the demo (the ```` ```text ```` block under
//! "## The demo") against what the binary prints.
//!
//! The numbers of a run vary from run to run, so the two are compared by shape:
//! both sides are [normalized](normalize) (every number, with the duration unit
//! glued to it, becomes `#`; runs of spaces become one), and every line of the
//! sample other than `...` and blank ones must appear, normalized, in the
//! normalized output, in the same order, and within the same run (the output is
//! cut into sections at each `admit demo, run …` and `comparison:` line). A
//! changed label, a reworded line, a removed or renamed field or metric, a line
//! moved to another run: each is a line of the sample found nowhere it should be.
//!
//! The run is the short comparison of `tests/demo.rs` (`overload_config`), given as
//! flags to the binary: it prints every line the sample shows, in the same formats
//! as the default run, in about 7 s instead of 16 s.

use std::process::Command;
use std::time::Instant;

/// The README, read when this test is compiled (cargo rebuilds it when it changes).
const README: &str = include_str!("../../README.md");

/// `overload_config` of `tests/demo.rs` as flags: capacity 8 from a memory budget,
/// holds of 500 ms, a wait budget of 1 s and the default overload target (100 ms),
/// 80 clients in 4 waves, three times what the gate turns over; beside them 4
/// stallers and 2 slow clients, as by default.
const SHORT_RUN: &[&str] = &[
    "--memory-budget",
    "8MiB",
    "--session-buffer",
    "1MiB",
    "--wait-budget",
    "1s",
    "--hold",
    "500ms",
    "--clients",
    "80",
    "--disconnects",
    "2",
    "--disconnect-after",
    "100ms",
    "--waves",
    "4",
    "--payload",
    "16KiB",
    "--stallers",
    "4",
    "--slow-clients",
    "2",
    "--plot",
    "none",
];

/// Lines that carry a suffix or not depending on the moment they were printed:
/// `(normalized prefix, suffix)`, the suffix dropped from lines with that prefix.
/// The progress line says `, overloaded` if the gate was overloaded when it was
/// printed (the summary's `overloaded # time(s)` line is checked as it is).
const MOMENTARY_SUFFIXES: &[(&str, &str)] = &[("[#] wave ", ", overloaded")];

/// The ```` ```text ```` block under `## The demo` in `readme`, and the README
/// line number of its first line.
fn readme_sample(readme: &str) -> (usize, &str) {
    let section_at = readme
        .find("\n## The demo\n")
        .expect("README.md has a \"## The demo\" section")
        + 1;
    let section = &readme[section_at..];
    let section = match section[1..].find("\n## ") {
        Some(end) => &section[..end + 1],
        None => section,
    };
    let fence = "\n```text\n";
    let start = section
        .find(fence)
        .expect("\"## The demo\" has a ```text block")
        + fence.len();
    let len = section[start..]
        .find("\n```")
        .expect("the ```text block is closed")
        + 1;
    let first_line = readme[..section_at + start].lines().count() + 1;
    (first_line, &section[start..start + len])
}

/// A line's shape: every number (a run of digits, with `.`/`,` decimals, and a
/// duration unit `ms`/`s` glued to it) becomes `#`, so do a range `#-#` and the
/// `-` the demo prints for a missing value; runs of whitespace become one space;
/// no space is kept inside `[ ]` (the progress line's padded clock); a momentary
/// suffix ([`MOMENTARY_SUFFIXES`]) is dropped. Digits glued to a letter or `_`
/// (`p50`, `p99`) are part of a name and stay.
fn normalize(line: &str) -> String {
    let chars: Vec<char> = line.chars().collect();
    let mut shape = String::with_capacity(line.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let in_name = i > 0 && (chars[i - 1].is_ascii_alphabetic() || chars[i - 1] == '_');
        if !c.is_ascii_digit() || in_name {
            // A digit in a name, and the rest of the name with it.
            if c.is_ascii_alphanumeric() || c == '_' {
                while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                    shape.push(chars[i]);
                    i += 1;
                }
            } else {
                shape.push(c);
                i += 1;
            }
            continue;
        }
        while i < chars.len()
            && (chars[i].is_ascii_digit()
                || (matches!(chars[i], '.' | ',')
                    && chars.get(i + 1).is_some_and(char::is_ascii_digit)))
        {
            i += 1;
        }
        for unit in ["ms", "s"] {
            let unit: Vec<char> = unit.chars().collect();
            let end = i + unit.len();
            if chars.get(i..end) == Some(&unit[..])
                && !chars.get(end).is_some_and(char::is_ascii_alphanumeric)
            {
                i = end;
                break;
            }
        }
        shape.push('#');
    }
    // The demo's `-` for a missing value (no wait to take a quantile of).
    let words: Vec<String> = shape
        .split_whitespace()
        .map(|word| match word {
            "-" => "#".to_owned(),
            _ => word.to_owned(),
        })
        .collect();
    let mut shape = words.join(" ");
    // `Retry-After 1-7s` and `Retry-After 1s` (the lowest equal to the highest).
    while shape.contains("#-#") {
        shape = shape.replace("#-#", "#");
    }
    shape = shape.replace("[ ", "[").replace(" ]", "]");
    for (prefix, suffix) in MOMENTARY_SUFFIXES {
        if shape.starts_with(prefix) {
            if let Some(kept) = shape.strip_suffix(suffix) {
                shape = kept.to_owned();
            }
        }
    }
    shape
}

/// A line that starts a section: a run's title, or the comparison.
fn starts_section(shape: &str) -> bool {
    shape.starts_with("admit demo, run ") || shape.starts_with("comparison:")
}

/// One line of a text, with its shape.
#[derive(Debug, Clone)]
struct Line<'a> {
    /// 1-based, in its text.
    number: usize,
    text: &'a str,
    shape: String,
}

fn lines(text: &str) -> Vec<Line<'_>> {
    text.lines()
        .enumerate()
        .map(|(i, text)| Line {
            number: i + 1,
            text,
            shape: normalize(text),
        })
        .collect()
}

/// The sample's lines to look for: no blank ones, no `...`, and one of each run
/// of lines of the same shape (the default run prints seven progress lines where
/// a short run prints two or three).
fn sample_lines(sample: &str) -> Vec<Line<'_>> {
    let mut wanted: Vec<Line<'_>> = Vec::new();
    for line in lines(sample) {
        if line.shape.is_empty() || line.shape == "..." {
            continue;
        }
        if wanted.last().is_some_and(|last| last.shape == line.shape) {
            continue;
        }
        wanted.push(line);
    }
    wanted
}

/// A line of the sample that the output does not have where the sample puts it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Drift {
    /// Its number in the sample.
    number: usize,
    /// As the sample has it.
    text: String,
    shape: String,
    /// The output line of the same section most like it, if any.
    nearest: Option<String>,
    /// The output has a line of its shape, but elsewhere: earlier in the same
    /// section, or in another one.
    elsewhere: bool,
}

/// How alike two shapes are: the characters they share at the start and at the end.
fn likeness(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let prefix = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let rest = a.len().min(b.len()) - prefix;
    let suffix = a
        .iter()
        .rev()
        .zip(b.iter().rev())
        .take(rest)
        .take_while(|(x, y)| x == y)
        .count();
    prefix + suffix
}

/// Every line of `sample` not found in `output` where it should be: in order, in
/// the section of `output` that the sample's own section titles point to.
fn drift(sample: &str, output: &str) -> Vec<Drift> {
    walk(&sample_lines(sample), &lines(output), 0)
}

/// The first output line at or after `from` that starts a section, or the end.
fn next_section(out: &[Line<'_>], from: usize) -> usize {
    (from..out.len())
        .find(|&i| starts_section(&out[i].shape))
        .unwrap_or(out.len())
}

/// [`drift`] of `sample` in `out`, whose lines before `at` are used up. A title
/// may skip sections; any other line is looked for in the current one. A title
/// not found is either a section the output does not have (its lines are looked
/// for in the current section) or the next one, renamed: whichever finds less
/// drift.
fn walk(sample: &[Line<'_>], out: &[Line<'_>], mut at: usize) -> Vec<Drift> {
    let mut found = Vec::new();
    for (k, line) in sample.iter().enumerate() {
        let title = starts_section(&line.shape);
        let end = if title {
            out.len()
        } else {
            next_section(out, at)
        };
        if let Some(i) = (at..end).find(|&i| out[i].shape == line.shape) {
            at = i + 1;
            continue;
        }
        let candidates: Vec<&Line<'_>> = if title {
            out[at..]
                .iter()
                .filter(|o| starts_section(&o.shape))
                .collect()
        } else {
            let start = (0..at)
                .rev()
                .find(|&i| starts_section(&out[i].shape))
                .unwrap_or(0);
            out[start..end].iter().collect()
        };
        let nearest = candidates
            .iter()
            .max_by_key(|o| likeness(&o.shape, &line.shape))
            .map(|o| o.text.to_owned());
        found.push(Drift {
            number: line.number,
            text: line.text.to_owned(),
            shape: line.shape.clone(),
            nearest,
            elsewhere: out.iter().any(|o| o.shape == line.shape),
        });
        if title {
            let rest = &sample[k + 1..];
            let stay = walk(rest, out, at);
            let renamed = walk(rest, out, (next_section(out, at) + 1).min(out.len()));
            found.extend(if renamed.len() < stay.len() {
                renamed
            } else {
                stay
            });
            return found;
        }
    }
    found
}

/// The drift as a person reads it, with README line numbers.
fn describe(drift: &[Drift], first_line: usize) -> String {
    drift
        .iter()
        .map(|d| {
            format!(
                "README.md:{}: {}\n    shape:   {}\n    nearest: {}{}",
                first_line + d.number - 1,
                d.text.trim_end(),
                d.shape,
                d.nearest.as_deref().map_or("(none)", str::trim_end),
                if d.elsewhere {
                    "\n    (a line of this shape is in the output, but elsewhere: out of order or in another run)"
                } else {
                    ""
                }
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_readme_sample_matches_what_the_demo_prints() {
    assert_the_sample_matches_a_run(SHORT_RUN);
}

/// The same against the default run the sample comes from (16 s):
/// `cargo test -p admit-demo --test readme_sample -- --ignored`.
#[test]
#[ignore = "the default run takes 16 s; the short run prints the same lines"]
fn the_readme_sample_matches_a_default_run() {
    assert_the_sample_matches_a_run(&["--plot", "none"]);
}

/// Runs the binary with `args`, and fails on any drift of the README's sample
/// from its output.
fn assert_the_sample_matches_a_run(args: &[&str]) {
    let started = Instant::now();
    let output = Command::new(env!("CARGO_BIN_EXE_admit-demo"))
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let (first_line, sample) = readme_sample(README);
    let found = drift(sample, &stdout);

    // The matcher catches each line of the sample it found, reworded, on this
    // very output.
    let wanted = sample_lines(sample);
    let matched: Vec<&Line<'_>> = wanted
        .iter()
        .filter(|l| found.iter().all(|d| d.number != l.number))
        .collect();
    assert!(matched.len() > 30, "{}", describe(&found, first_line));
    for line in matched {
        let reworded = reword_line(sample, line.number);
        let with_it = drift(&reworded, &stdout);
        assert_eq!(
            with_it.len(),
            found.len() + 1,
            "line {} reworded: {with_it:#?}",
            line.number
        );
        assert!(
            with_it.iter().any(|d| d.number == line.number),
            "line {} reworded: {with_it:#?}",
            line.number
        );
    }

    assert!(
        found.is_empty(),
        "the README's sample output (README.md:{first_line}) has drifted from what \
         the demo prints; {} line(s) of it are not in the output of `admit-demo {}`, \
         in order, in their run:\n{}\n\nthe output:\n{stdout}",
        found.len(),
        args.join(" "),
        describe(&found, first_line),
    );
    eprintln!(
        "the README's sample matched a run of {:?}",
        started.elapsed()
    );
}

/// The sample as if printed: without its `...` lines, with every number other
/// than in the sample (and some in other units), and the progress lines of one
/// moment only, as a short run prints them.
fn as_another_run_printed(sample: &str) -> String {
    let mut printed = Vec::new();
    let mut progress = 0;
    for line in sample.lines().filter(|l| l.trim() != "...") {
        if line.trim_start().starts_with("[ ") {
            progress += 1;
            if progress > 2 {
                continue;
            }
        }
        let line = line
            .replace("1.93s", "380ms")
            .replace("Retry-After 1-3s", "Retry-After 2s")
            .replace(", overloaded", "");
        let mut in_name = false;
        let line: String = line
            .chars()
            .map(|c| {
                let shifted = match c.to_digit(10) {
                    Some(d) if !in_name => char::from_digit((d + 3) % 10, 10).unwrap(),
                    _ => c,
                };
                in_name = c.is_ascii_alphabetic() || c == '_' || (in_name && c.is_ascii_digit());
                shifted
            })
            .collect();
        printed.push(line);
    }
    printed.join("\n")
}

/// A fixed excerpt of the sample, for the matcher's own tests: they must not
/// depend on the README's wording of the day.
const EXCERPT: &str = "\
admit demo, run 1/2: an upload server behind an admission gate (fixed wait budget), and a burst of clients

  capacity  memory budget 128 MiB / session buffer 8 MiB = 16 units; max_units floor 2 not needed -> 16 units
            no overload target: every wait may last the whole budget
  load      240 clients in 6 wave(s) 1s apart, 6 of them hang up after 250ms; 256 KiB bodies, 1s processing
  ...
summary: fixed wait budget (8.5s)
  requests  240: 104 admitted (200), 130 shed (503, Retry-After 1-7s), 6 cancelled (hung up while parked)
            shed by route: upload 96, mirror 34; by reason: wait_budget 130, queue_full 0, overload 0, hopeless 0
            server saw 6 hang-ups as Cancelled, 0 after admission
  units     peak in use 16/16 (gate, sampled every 2ms), 16/16 (units_in_use gauge, 35 scrapes); at the end 0
  wait      admitted (104): p50 1.93s, p99 2.00s (max 2.00s)
            time to shed (130): p50 2.00s, p99 2.01s (max 2.01s); wait budget 2s
  overload  no target: the wait budget alone
  ...

admit demo, run 2/2: an upload server behind an admission gate (overload target 200ms), and a burst of clients
  ...
  [  0.8s] wave 1/6  done   1/240: 0 admitted, 0 shed, 1 hung up  |  gate 16/16 in use, 17 parked
  [  1.8s] wave 2/6  done  34/240: 13 admitted, 20 shed, 1 hung up  |  gate 16/16 in use, 24 parked
  [  3.8s] wave 4/6  done 133/240: 39 admitted, 93 shed, 1 hung up  |  gate 16/16 in use, 4 parked, overloaded

summary: overload target 200ms (7.3s)
  requests  240: 83 admitted (200), 156 shed (503, Retry-After 1-3s), 1 cancelled (hung up while parked)
  overload  target 200ms: overloaded 1 time(s), 4.2s in all; a request parked while overloaded waits at most 400ms
  /metrics  (excerpt, after the load)
            upload_sessions_overloaded 1
            upload_sessions_shed_total{source=\"upload\",reason=\"hopeless\"} 92
  ...
PASS: all 11 checks held: never over capacity, every shed a 503 with Retry-After, shed_total = 503s seen (156), hang-ups counted nowhere, drained at shutdown, units back to 0

comparison: the same load (240 clients), one row per gate
  gate                     admitted  shed  time to shed p50 / p99  admitted wait p50 / p99  peak units
  fixed wait budget             104   130           2.00s / 2.01s            1.93s / 2.00s       16/16
  overload target 200ms          83   156             0ms / 1.81s            335ms / 1.98s       16/16
PASS: every check held: 12 in the fixed wait budget run, 11 in the overload target 200ms run
";

#[test]
fn the_sample_matches_another_run_with_other_numbers() {
    for sample in [readme_sample(README).1, EXCERPT] {
        let printed = as_another_run_printed(sample);
        assert_ne!(printed, sample);
        let found = drift(sample, &printed);
        assert!(found.is_empty(), "{}\n\n{printed}", describe(&found, 1));
    }
}

/// `sample` with its line `number` (1-based) reworded: an `x` after its last
/// letter (`budget` becomes `budgetx`; a title stays a title).
fn reword_line(sample: &str, number: usize) -> String {
    let mut lines: Vec<String> = sample.lines().map(str::to_owned).collect();
    let line = &mut lines[number - 1];
    let last = line
        .rfind(|c: char| c.is_ascii_alphabetic())
        .expect("a line with a word");
    line.insert(last + 1, 'x');
    lines.join("\n")
}

/// `sample` with `from` replaced by `to` once; `from` must be there.
fn mutated(sample: &str, from: &str, to: &str) -> String {
    assert!(sample.contains(from), "{from:?} is not in the sample");
    sample.replacen(from, to, 1)
}

/// Each change to the sample is drift against an unchanged output, on exactly the
/// changed line.
#[test]
fn a_changed_label_line_or_field_is_drift() {
    let sample = EXCERPT;
    let printed = as_another_run_printed(sample);
    let changes = [
        // a label
        ("peak in use", "peak use", "peak use"),
        // a reworded line
        (
            "no target: the wait budget alone",
            "no target: only the wait budget",
            "only the wait budget",
        ),
        // a removed field
        (
            ", queue_full 0, overload 0",
            ", overload 0",
            "wait_budget 130, overload 0",
        ),
        // a renamed metric
        (
            "upload_sessions_overloaded 1",
            "upload_sessions_overload 1",
            "upload_sessions_overload 1",
        ),
        // a renamed column
        ("peak units", "peak in use", "peak in use"),
        // plural forms printed as they are
        ("1 time(s)", "1 times", "1 times"),
        ("saw 6 hang-ups", "saw 6 hangups", "hangups"),
        // a unit of size
        ("256 KiB bodies", "256 kB bodies", "kB bodies"),
        // a run title
        ("run 2/2: an upload server", "run 2/2: a server", "a server"),
    ];
    for (from, to, marker) in changes {
        let changed = mutated(sample, from, to);
        let found = drift(&changed, &printed);
        assert_eq!(found.len(), 1, "{from:?} -> {to:?}: {found:#?}");
        assert!(
            found[0].text.contains(marker),
            "{from:?} -> {to:?}: {found:#?}"
        );
        assert!(!found[0].elsewhere, "{found:#?}");
    }
}

#[test]
fn a_line_out_of_order_or_in_the_other_run_is_drift() {
    let sample = EXCERPT;
    let printed = as_another_run_printed(sample);
    let wait = "  wait      admitted (104): p50 1.93s, p99 2.00s (max 2.00s)\n";
    let units = "  units     peak in use 16/16 (gate, sampled every 2ms), 16/16 (units_in_use gauge, 35 scrapes); at the end 0\n";

    // Two lines of run 1 swapped.
    let swapped = mutated(sample, &format!("{units}{wait}"), &format!("{wait}{units}"));
    let found = drift(&swapped, &printed);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(found[0].elsewhere, "{found:#?}");

    // Run 1's `no overload target` line moved into run 2.
    let line = "            no overload target: every wait may last the whole budget\n";
    let moved = mutated(sample, line, "").replacen(
        "  [  0.8s] wave 1/6",
        &format!("{line}  [  0.8s] wave 1/6"),
        1,
    );
    let found = drift(&moved, &printed);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(found[0].text.contains("no overload target"), "{found:#?}");
    assert!(found[0].elsewhere, "{found:#?}");

    // A line the output does not have at all, under a run title it does not have.
    let extra = mutated(
        sample,
        "\nsummary: overload target 200ms",
        "\nadmit demo, run 3/3: nothing\nsummary: overload target 200ms",
    );
    let found = drift(&extra, &printed);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(found[0].text.contains("run 3/3"), "{found:#?}");
}

#[test]
fn shapes() {
    assert_eq!(
        normalize("  [  0.8s] wave 1/6  done   1/240: 0 admitted  |  gate 16/16 in use, 4 parked, overloaded"),
        "[#] wave #/# done #/#: # admitted | gate #/# in use, # parked"
    );
    assert_eq!(
        normalize("  [100.2s] wave 6/6  done 235/240"),
        normalize("  [  6.8s] wave 6/6  done  35/240")
    );
    assert_eq!(
        normalize("  wait      admitted (83): p50 335ms, p99 1.98s (max 0.2ms)"),
        "wait admitted (#): p50 #, p99 # (max #)"
    );
    assert_eq!(
        normalize("(503, Retry-After 1-7s)"),
        normalize("(503, Retry-After 2s)")
    );
    assert_eq!(
        normalize("  overload target 200ms          83   156             0ms / 1.81s            - / -       16/16"),
        "overload target # # # # / # # / # #/#"
    );
    assert_eq!(
        normalize("hold_seconds_sum 104.280020384, 1,234 in 1s..60s; 16 scrapes, 128 MiB"),
        "hold_seconds_sum #, # in #..#; # scrapes, # MiB"
    );
    assert_eq!(normalize("time(s) hang-ups - x"), "time(s) hang-ups # x");
    // Not a progress line: the suffix stays.
    assert_eq!(normalize("gate 16/16, overloaded"), "gate #/#, overloaded");
}

#[test]
fn the_sample_is_found() {
    let (first_line, sample) = readme_sample(README);
    assert_eq!(
        README.lines().nth(first_line - 1),
        sample.lines().next(),
        "line {first_line}"
    );
    assert!(sample.starts_with("admit demo, run 1/2"), "{sample}");
    assert!(sample_lines(sample).len() > 30, "{sample}");
}

/// The `--long-flags` named in `text`, in order, each once.
fn flags_in(text: &str) -> Vec<&str> {
    let mut flags = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("--") {
        let tail = &rest[at + 2..];
        let len = tail
            .find(|c: char| !(c.is_ascii_lowercase() || c == '-'))
            .unwrap_or(tail.len());
        let flag = &rest[at..at + 2 + len];
        if len > 0 && !flags.contains(&flag) {
            flags.push(flag);
        }
        rest = &tail[len..];
    }
    flags
}

#[test]
fn the_readme_lists_every_flag_of_the_help_text() {
    let start = README
        .find("Flags (`cargo run -p admit-demo -- --help`):")
        .expect("README.md lists the demo's flags");
    let end = start + README[start..].find("\n\n").expect("the paragraph ends");
    let mut listed = flags_in(&README[start..end]);
    listed.retain(|&flag| flag != "--help");
    let mut help = flags_in(admit_demo::USAGE);
    help.retain(|&flag| flag != "--help");
    assert!(
        help.len() > 15 && help.contains(&"--disconnect-after"),
        "{help:?}"
    );
    let missing: Vec<_> = help.iter().filter(|f| !listed.contains(f)).collect();
    let unknown: Vec<_> = listed.iter().filter(|f| !help.contains(f)).collect();
    assert!(
        missing.is_empty() && unknown.is_empty(),
        "README's flag list: missing {missing:?}, not in --help {unknown:?}"
    );
}
