"""kubeflow/cron.py against robfig/cron v1.2.0's own test vectors (spec_test.go
TestNext L74-152, TestActivation L10-60; parser_test.go for refusals), the
cron KFP 2.15 to 2.17 parse and schedule with."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from kubeflow import cron

UTC = timezone.utc


def at(text: str) -> datetime:
    for form in ("%a %b %d %H:%M:%S %Y", "%a %b %d %H:%M %Y"):
        try:
            return datetime.strptime(text, form).replace(tzinfo=UTC)
        except ValueError:
            pass
    raise ValueError(text)


# spec_test.go TestNext (the UTC rows; the zoned rows follow Go's location rules).
NEXT = [
    ("Mon Jul 9 14:45 2012", "0 0/15 * * *", "Mon Jul 9 15:00 2012"),
    ("Mon Jul 9 14:59 2012", "0 0/15 * * *", "Mon Jul 9 15:00 2012"),
    ("Mon Jul 9 14:59:59 2012", "0 0/15 * * *", "Mon Jul 9 15:00 2012"),
    ("Mon Jul 9 15:45 2012", "0 20-35/15 * * *", "Mon Jul 9 16:20 2012"),
    ("Mon Jul 9 23:46 2012", "0 */15 * * *", "Tue Jul 10 00:00 2012"),
    ("Mon Jul 9 23:45 2012", "0 20-35/15 * * *", "Tue Jul 10 00:20 2012"),
    ("Mon Jul 9 23:35:51 2012", "15/35 20-35/15 * * *", "Tue Jul 10 00:20:15 2012"),
    ("Mon Jul 9 23:35:51 2012", "15/35 20-35/15 1/2 * *", "Tue Jul 10 01:20:15 2012"),
    ("Mon Jul 9 23:35:51 2012", "15/35 20-35/15 10-12 * *", "Tue Jul 10 10:20:15 2012"),
    ("Mon Jul 9 23:35:51 2012", "15/35 20-35/15 1/2 */2 * *", "Thu Jul 11 01:20:15 2012"),
    ("Mon Jul 9 23:35:51 2012", "15/35 20-35/15 * 9-20 * *", "Wed Jul 10 00:20:15 2012"),
    ("Mon Jul 9 23:35:51 2012", "15/35 20-35/15 * 9-20 Jul *", "Wed Jul 10 00:20:15 2012"),
    ("Mon Jul 9 23:35 2012", "0 0 0 9 Apr-Oct ?", "Thu Aug 9 00:00 2012"),
    ("Mon Jul 9 23:35 2012", "0 0 0 */5 Apr,Aug,Oct Mon", "Mon Aug 6 00:00 2012"),
    ("Mon Jul 9 23:35 2012", "0 0 0 */5 Oct Mon", "Mon Oct 1 00:00 2012"),
    ("Mon Jul 9 23:35 2012", "0 0 0 * Feb Mon", "Mon Feb 4 00:00 2013"),
    ("Mon Jul 9 23:35 2012", "0 0 0 * Feb Mon/2", "Fri Feb 1 00:00 2013"),
    ("Mon Dec 31 23:59:45 2012", "0 * * * * *", "Tue Jan 1 00:00:00 2013"),
    ("Mon Jul 9 23:35 2012", "0 0 0 29 Feb ?", "Mon Feb 29 00:00 2016"),
]


@pytest.mark.parametrize(("start", "spec", "expected"), NEXT)
def test_next_matches_robfig_cron(start, spec, expected):
    assert cron.parse(spec).next(at(start)) == at(expected)


@pytest.mark.parametrize("spec", ["0 0 0 30 Feb ?", "0 0 0 31 Apr ?"])
def test_a_date_that_never_comes_has_no_next(spec):
    assert cron.parse(spec).next(at("Mon Jul 9 23:35 2012")) is None


# spec_test.go TestActivation: the time is an activation iff Next(time - 1s) is it.
ACTIVATION = [
    ("Mon Jul 9 15:00 2012", "0 0/15 * * *", True),
    ("Mon Jul 9 15:40 2012", "0 0/15 * * *", False),
    ("Sun Jul 15 08:30 2012", "0 30 08 ? Jul Sun", True),
    ("Mon Jul 16 08:30 2012", "0 30 08 15 Jul ?", False),
    ("Mon Jul 9 15:00 2012", "@hourly", True),
    ("Mon Jul 9 15:04 2012", "@hourly", False),
    ("Mon Jul 9 15:00 2012", "@daily", False),
    ("Mon Jul 9 00:00 2012", "@daily", True),
    ("Sun Jul 8 00:00 2012", "@weekly", True),
    ("Sun Jul 1 00:00 2012", "@monthly", True),
    ("Fri Jun 15 00:00 2012", "0 * * 1,15 * Sun", True),
    ("Sun Jul 15 00:00 2012", "0 * * */10 * Sun", False),
    ("Mon Jul 9 00:00 2012", "0 * * 1,15 * *", False),
    ("Sun Jul 15 00:00 2012", "0 * * */2 * Sun", True),
]


@pytest.mark.parametrize(("moment", "spec", "expected"), ACTIVATION)
def test_activation_matches_robfig_cron(moment, spec, expected):
    t = at(moment)
    assert (cron.parse(spec).next(t - timedelta(seconds=1)) == t) is expected


def test_every_adds_whole_seconds():
    schedule = cron.parse("@every 1h30m")
    assert schedule.next(at("Mon Jul 9 15:00 2012")) == at("Mon Jul 9 16:30 2012")
    assert cron.parse("@every 100ms").every == 1


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("", "Empty spec string"),
        ("0 0 3 *", "Expected 5 to 6 fields, found 4"),
        ("0 0 3 * * * *", "Expected 5 to 6 fields, found 7"),
        ("60 0 3 * * *", "End of range (60) above maximum (59)"),
        ("0 0 24 * * *", "End of range (24) above maximum (23)"),
        ("0 0 3 0 * *", "Beginning of range (0) below minimum (1)"),
        ("0 0 3 * 5-2 *", "Beginning of range (5) beyond end of range (2)"),
        ("0 0 3 * * 1-2-3", "Too many hyphens"),
        ("0 */0 3 * * *", "Step of range should be a positive number"),
        ("0 0 x * * *", "Failed to parse int from x"),
        ("@dialy", "Unrecognized descriptor: @dialy"),
        ("@every 1d", "Failed to parse duration @every 1d"),
    ],
)
def test_what_robfig_cron_refuses_is_refused_in_its_words(spec, message):
    with pytest.raises(cron.CronError, match=message.replace("(", r"\(").replace(")", r"\)")):
        cron.parse(spec)
