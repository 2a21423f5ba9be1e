module github.com/leaderrun/leaderrun/pg

go 1.26.8

require (
	github.com/jackc/pgx/v5 v5.13.0
	github.com/leaderrun/leaderrun v0.0.0-00010101000000-000000000000
	github.com/rogpeppe/go-internal v1.16.0
)

require (
	github.com/fsnotify/fsnotify v1.10.1 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/urfave/cli/v3 v3.14.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
	golang.org/x/text v0.41.0 // indirect
	golang.org/x/tools v0.51.0 // indirect
)

replace github.com/leaderrun/leaderrun => ../
