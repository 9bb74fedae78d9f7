"""Red-team scans (issue 33): attack strategies applied to objectives, sent to a target, judged for harm."""
