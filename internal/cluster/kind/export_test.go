package kind

// LogInfoForTest feeds one of kind's info messages through the adapter.
func LogInfoForTest(p Progress, m string) { (&logger{p: p}).V(0).Info(m) }
