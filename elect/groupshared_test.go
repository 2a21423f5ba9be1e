package elect

func groupSharedRole() int { return 2 }
