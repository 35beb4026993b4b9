//! Scheduler due rules with fixed clocks: built-ins in a non-UTC zone, catch-up after
//! downtime (once, not once per missed slot), priorities, idle, intervals.

use jiff::SignedDuration;
use mneme_workspace::schedule::{
    CONSOLIDATION_TASK, CONTEXT_CHECK_TASK, Priority, ROTATION_TASK, Task, TaskAction, Trigger, builtin_tasks, due_tasks, next_due,
};

use crate::{ts, tz};

fn names<'a>(tasks: &[&'a Task]) -> Vec<&'a str> {
    tasks.iter().map(|task| task.name.as_str()).collect()
}

fn find<'a>(tasks: &'a mut [Task], name: &str) -> &'a mut Task {
    tasks.iter_mut().find(|task| task.name == name).expect(name)
}

#[test]
fn builtin_tasks_fall_due_at_their_slots_in_tokyo() {
    let tokyo = tz("Asia/Tokyo");
    // Installed at 19:00 JST on Saturday 2024-03-09.
    let tasks = builtin_tasks(ts("2024-03-09T10:00:00Z"));
    let due_at = |name: &str| tasks.iter().find(|task| task.name == name).and_then(|task| task.due_at(&tokyo));
    assert_eq!(due_at(CONTEXT_CHECK_TASK), Some(ts("2024-03-09T10:30:00Z")));
    // Midnight JST is 15:00 UTC the day before.
    assert_eq!(due_at(ROTATION_TASK), Some(ts("2024-03-09T15:00:00Z")));
    // Sunday 2024-03-10 02:00 JST.
    assert_eq!(due_at(CONSOLIDATION_TASK), Some(ts("2024-03-09T17:00:00Z")));

    assert!(due_tasks(&tasks, ts("2024-03-09T10:29:59Z"), true, &tokyo).is_empty());
    assert_eq!(names(&due_tasks(&tasks, ts("2024-03-09T15:00:00Z"), true, &tokyo)), [CONTEXT_CHECK_TASK, ROTATION_TASK]);
    assert_eq!(
        names(&due_tasks(&tasks, ts("2024-03-09T17:00:00Z"), true, &tokyo)),
        [CONTEXT_CHECK_TASK, ROTATION_TASK, CONSOLIDATION_TASK],
        "priority 1 first, then the maintenance task due longest"
    );
    // The same cron in UTC falls due at UTC midnight instead.
    let utc_rotation = tasks.iter().find(|task| task.name == ROTATION_TASK).expect("rotation");
    assert_eq!(utc_rotation.due_at(&tz("UTC")), Some(ts("2024-03-10T00:00:00Z")));
}

#[test]
fn missed_slots_after_downtime_run_once() {
    let tokyo = tz("Asia/Tokyo");
    let mut tasks = builtin_tasks(ts("2024-02-01T00:00:00Z"));
    // Rotation last ran at midnight JST on 2024-03-02, then the daemon was down for a week.
    find(&mut tasks, ROTATION_TASK).mark_run(ts("2024-03-01T15:00:00Z"));
    find(&mut tasks, CONTEXT_CHECK_TASK).enabled = false;
    find(&mut tasks, CONSOLIDATION_TASK).enabled = false;
    let back = ts("2024-03-09T16:00:00Z");

    let due = due_tasks(&tasks, back, true, &tokyo);
    assert_eq!(names(&due), [ROTATION_TASK], "seven missed slots, one run");

    // The runner records the run at the time it happened; the missed slots are gone.
    find(&mut tasks, ROTATION_TASK).mark_run(back);
    for minutes in [0, 1, 60, 22 * 60] {
        let later = back.checked_add(SignedDuration::from_mins(minutes)).expect("in range");
        assert!(due_tasks(&tasks, later, true, &tokyo).is_empty(), "nothing due {minutes} min later");
    }
    assert_eq!(names(&due_tasks(&tasks, ts("2024-03-10T15:00:00Z"), true, &tokyo)), [ROTATION_TASK]);
}

#[test]
fn require_idle_tasks_wait_for_idle_and_others_do_not() {
    let utc = tz("UTC");
    let created = ts("2024-03-09T00:00:00Z");
    let mut tasks = builtin_tasks(created);
    tasks.push(Task {
        name: "daily-report".to_owned(),
        trigger: Trigger::cron("0 9 * * *").expect("cron"),
        action: TaskAction::Message("Send the daily report.".to_owned()),
        priority: Priority::Normal,
        require_idle: false,
        enabled: true,
        created,
        last_run: None,
    });
    let now = ts("2024-03-09T09:00:00Z");
    assert_eq!(names(&due_tasks(&tasks, now, false, &utc)), ["daily-report"]);
    assert_eq!(
        names(&due_tasks(&tasks, now, true, &utc)),
        [CONTEXT_CHECK_TASK, "daily-report"],
        "rotation is due at the next midnight, not the one before creation"
    );
}

#[test]
fn intervals_count_from_the_last_run() {
    let utc = tz("UTC");
    let mut task =
        builtin_tasks(ts("2024-03-09T00:00:00Z")).into_iter().find(|task| task.name == CONTEXT_CHECK_TASK).expect("context check");
    task.mark_run(ts("2024-03-09T12:00:00Z"));
    assert!(!task.is_due(ts("2024-03-09T12:29:59Z"), true, &utc));
    assert!(task.is_due(ts("2024-03-09T12:30:00Z"), true, &utc));
    assert!(task.is_due(ts("2024-03-10T12:00:00Z"), true, &utc), "still due once, a day later");
    assert_eq!(next_due(&task, ts("2024-03-09T12:45:00Z"), &utc), Some(ts("2024-03-09T13:15:00Z")));
    task.enabled = false;
    assert!(!task.is_due(ts("2024-03-10T12:00:00Z"), true, &utc));
}

#[test]
fn tasks_round_trip_through_json() {
    let tasks = builtin_tasks(ts("2024-03-09T00:00:00Z"));
    let json = serde_json::to_value(&tasks).expect("serialise");
    assert_eq!(json[0]["trigger"], serde_json::json!({"cron": "0 0 * * *"}));
    assert_eq!(json[0]["priority"], 2);
    assert_eq!(json[2]["trigger"], serde_json::json!({"every": "30m"}));
    assert_eq!(json[2]["action"], serde_json::json!({"kind": "context_check"}));
    let back: Vec<Task> = serde_json::from_value(json).expect("deserialise");
    assert_eq!(back, tasks);
}
