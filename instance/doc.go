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
//   - A launch never hangs on a primary that ends, whatever its ctx does
//     and when (SIGTERM through signal.NotifyContext, an `app --quit`
//     answered just before): a primary whose ctx ends keeps its bus
//     while it drains, so the callers it accepted get their answers, and
//     one that arrives meanwhile is not accepted and goes, once the
//     primary has let go, to the next primary, which may be itself. Each
//     launch is answered, becomes the primary, or is told within
//     AckTimeout that nobody took it.
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
//     caller's. No variable is sent unless named in Options.Env. Any
//     argv the kernel accepted is forwarded (Linux takes at most 6 MiB of
//     arguments and environment; `find -exec app {} +` makes about 2 MB):
//     an invocation over 256 KiB travels in parts, and a primary takes
//     invocations of up to 64 MiB, encoded.
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
// # Activation tokens
//
// A primary that should raise its window for a later launch needs the
// token the desktop gave that launch, not its own: forward it with
// Options.Env = []string{"XDG_ACTIVATION_TOKEN", "DESKTOP_STARTUP_ID"}
// (Wayland's xdg-activation and X11's startup notification; `leaderrun
// --single-instance --forward-env XDG_ACTIVATION_TOKEN,DESKTOP_STARTUP_ID`
// from the command line). The primary finds them in Invocation.Env as
// "NAME=value" and hands the token to its toolkit when it presents the
// window (GTK: gtk_window_set_startup_id; on Wayland itself,
// xdg_activation_v1.activate with the token); a token is good for one
// activation, soon after the launch.
//
// # Goroutines and descriptors left behind
//
// A Run of a process may start (as a primary whose term lasts longer than
// elect.PathWatchDelay, or as a launch that waits for a primary to serve)
// the process's one inotify instance (package oslock), shared by
// every lock, queue and bus of the process, and the goroutine that reads
// it, github.com/leaderrun/leaderrun/oslock.readSentinel; and the
// process's one watch of its mount table (a holder learns of a mount
// over its lock directory by it), /proc/self/mountinfo, with the goroutine
// github.com/leaderrun/leaderrun/oslock.readMounts. They last until the
// process exits, by design: a process costs the user one inotify instance,
// however many names it takes part in. Everything else that Run starts has
// ended when it returns. A goleak test may see those goroutines and
// ignores them with
//
//	goleak.IgnoreAnyFunction("github.com/leaderrun/leaderrun/oslock.readSentinel"),
//	goleak.IgnoreAnyFunction("github.com/leaderrun/leaderrun/oslock.readMounts")
//
// and a descriptor check may see two descriptors, anon_inode:inotify and
// /proc/PID/mountinfo, beside the Go runtime's own poller
// (anon_inode:[eventpoll] and anon_inode:[eventfd]), which any program
// that opened a pipe or socket has.
//
// # Scope
//
// One primary per lock directory. The default directory is
// elect.DefaultDir(): ~/.local/state/leaderrun, with the home taken from
// the user database, never from $HOME, $XDG_RUNTIME_DIR or any other
// variable, so it is the same from every environment a user runs in: a
// desktop session, a terminal, ssh, cron, sudo -u, a systemd user
// service. A user has one primary per name on the machine, whichever
// login started it. A sandbox (Flatpak, Snap) meets the host's instance
// only if it sees that same directory; give both Options.Dir otherwise.
package instance
