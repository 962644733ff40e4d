package checks

// lowerPriority leaves the build's priority alone: Windows has no nice.
func lowerPriority(int) {}
