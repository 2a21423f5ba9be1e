module github.com/leaderrun/leaderrun

go 1.26.8

require (
	github.com/fsnotify/fsnotify v1.10.1
	github.com/gofrs/flock v0.13.2
	github.com/rogpeppe/go-internal v1.16.0
	github.com/urfave/cli/v3 v3.14.0
	go.uber.org/goleak v1.3.0
	golang.org/x/sys v0.50.0
)

require golang.org/x/tools v0.51.0 // indirect
