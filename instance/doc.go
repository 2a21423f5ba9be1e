// Package instance makes a program single-instance: the first launch
// becomes the primary, and every later launch hands its command line to
// the primary and exits with the primary's answer, as GApplication's
// command-line forwarding does, without its failure modes.
//
//	res, err := instance.Run(ctx, "myapp", instance.Options{}, func(ctx context.Context, p *instance.Primary) error {
//		for {
//			select {
//			case inv := <-p.Invocations():
//				fmt.Fprintf(inv.Stdout, "opened %q\n", inv.Strings())
//				inv.Done(0)
//			case <-ctx.Done():
//				return nil
//			}
//		}
//	})
//	if err != nil {
//		log.Fatal(err)
//	}
//	os.Exit(res.Exit)
//
// The primary holds the name's exclusive lock (package elect) and serves
// its bus (package bus); a later launch queues for the lock and, while it
// waits, forwards over the bus. Whichever comes first decides: the lock,
// and this launch is the primary; a primary that accepts, and it forwards.
//
// # Guarantees
//
//   - At most one primary per name and lock directory at a time, however
//     close together launches start: the kernel's flock decides, not a
//     check-then-create.
//   - Two phases: a forward is accepted when the primary's application
//     takes it from Invocations, then done when it calls Done. A primary
//     that does not accept within Options.AckTimeout (default 5s) —
//     stopped, hung, or not reading — gives a *NotRespondingError naming
//     its pid, epoch, start and state ("stopped", "running"); with
//     Options.Replace the launch steals the name, the old primary is
//     killed after Options.KillAfter, and the launch becomes the primary.
//     Nothing ever waits without a bound for acceptance.
//   - A primary that ends before accepting leaves the invocation to the
//     launch, which is already in line: it becomes the primary and
//     handles its own invocation, or forwards to whoever did. One that
//     ends after accepting gives ErrAcceptedLost: the invocation is never
//     run again, by anyone.
//   - Every invocation carries an ID (Options.ID, random by default); a
//     primary delivers an ID once, so a retry to it is answered, not run
//     again (it remembers its last 4096 finished IDs). A new primary knows
//     nothing of its predecessor's: after ErrAcceptedLost, do not retry.
//   - Arguments, working directory and variables arrive byte for byte:
//     nothing is joined, split, reordered or re-encoded; invalid UTF-8,
//     empty strings and newlines survive. The working directory is the
//     caller's. No variable is sent unless named in Options.Env.
//   - Output written to Invocation.Stdout and Stderr is streamed to the
//     caller, of any size; each stream keeps its order, not their
//     interleaving. The exit status comes back unchanged. With
//     Options.Stdin, the caller's input is streamed to Invocation.Stdin,
//     paced by the application's reading.
//   - Invocations never cross users: the bus admits peers of the
//     primary's uid only, and a launch talks only to a primary of its own
//     uid (ErrForeign otherwise).
//   - A primary whose function returns keeps serving, up to 5 seconds,
//     until its callers have read the answers they were given; accepted
//     invocations it did not finish give their callers ErrAcceptedLost.
//
// # Not guaranteed
//
//   - An invocation is accepted the moment the application takes it, and
//     the caller learns so a moment later. A primary killed in that
//     instant leaves the caller believing it was never taken: the caller
//     then handles it itself, and the dead primary's application may have
//     begun it too. One stopped in that instant is reported as not
//     responding while its application has the invocation. No protocol
//     closes this window (the commit is local to the primary); it lasts a
//     scheduling slice and one write to a socket.
//   - The primary's state is read when AckTimeout expires; it describes
//     the past by the time it is shown.
//   - Descriptors are not passed: stdin is streamed (Options.Stdin), and
//     relative paths resolve against Invocation.Cwd as a path, which may
//     differ from the caller's view in another mount namespace.
//
// # Scope
//
// One primary per lock directory: with the default directory (private to
// the user, under $XDG_RUNTIME_DIR), one per user and login; Flatpak and
// Snap give each app its own runtime directory, so a sandboxed instance and
// a host instance do not meet.
package instance
