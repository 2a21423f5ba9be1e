package etcd

func runRole(string) int { return 2 }
