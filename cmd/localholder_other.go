//go:build !linux

package cmd

import "context"

// Without pidfds and the term fence there is nothing a waiter could do
// safely: a dead holder's term expires with its lease.
func watchLocalHolder(context.Context, *opened, string) {}
