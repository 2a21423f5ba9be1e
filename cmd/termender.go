package cmd

import (
	"context"

	"github.com/leaderrun/leaderrun/elect"
)

// TermEnder is a Backend whose terms outlive a leaderrun that dies or
// stops unless someone ends them: an etcd term lasts until its lease
// expires, TTL after the last renewal. leaderrun hands each term's token
// to the term's watchdog (a process of its own, see watchdog_linux.go),
// which, once it has stopped COMMAND because leaderrun died or stopped
// renewing the term, ends the term with the app's WithTermEnder function,
// so that the next holder, on any host, need not wait for the TTL.
type TermEnder interface {
	Backend
	// TermToken returns one line, without a newline, from which the
	// WithTermEnder function ends lead's term in another process of the
	// same user. It may hold credentials: it travels over a pipe only.
	TermToken(lead *elect.Leadership) (string, error)
}

// WithTermEnder gives the app, when it runs as a term's watchdog, the
// function that ends a term from its TermToken.
func WithTermEnder(end func(ctx context.Context, token string) error) Option {
	return func(a *App) { a.ender = end }
}

// TermEndPreparer readies ahead, while a term runs, the end its watchdog
// may have to make: a backend whose WithTermEnder function connects to a
// server each time (PostgreSQL: a connection and an authentication, many
// milliseconds) connects while COMMAND runs instead, so that ending the
// term once COMMAND is gone is one round trip. It is optional; give it
// with WithTermEndPreparer beside WithTermEnder.
type TermEndPreparer interface {
	// PrepareTermEnd is called by the watchdog when it learns the term's
	// token, and returns at once (it readies in the background). end
	// ends the term as the WithTermEnder function would, over what was
	// readied if that still serves and afresh otherwise: what was readied
	// failing, or gone stale (the server ended an idle connection), must
	// not fail the end. release frees what was readied. The watchdog
	// calls end (then release) only once COMMAND is gone, or release
	// alone when the term ended cleanly.
	PrepareTermEnd(token string) (end func(ctx context.Context) error, release func())
}

// WithTermEndPreparer gives the app's watchdog a TermEndPreparer.
func WithTermEndPreparer(p TermEndPreparer) Option {
	return func(a *App) { a.prepare = p }
}

// HolderEnder is a Backend whose terms outlive a holder that died until
// they expire (etcd's lease, TTL after the last renewal), and that can end
// one at once. A leaderrun waiting in line on the same host as such a
// holder learns of its death from the kernel and ends its term, so that
// the next holder, on any host, need not wait for the TTL; the term's
// watchdog does the same, and this is for when it died too.
type HolderEnder interface {
	Backend
	// EndHolder ends h's term of name, if it is still one (the same pid,
	// host and epoch), once the caller knows h's leaderrun is dead and its
	// COMMAND gone.
	EndHolder(ctx context.Context, name string, h elect.Holder) error
}
