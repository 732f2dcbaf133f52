package platform

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

type childSpec struct {
	name, addr, url, bin, logPath string
	env                           []string
}

// child is one service process. Its output goes to its log file only: the
// terminal of `make run` shows the summary, the logs stay greppable.
type child struct {
	childSpec
	cmd      *exec.Cmd
	done     chan struct{} // closed when the process has exited
	waitErr  error         // valid after done
	stopping atomic.Bool   // set before we signal it, so its exit is expected
}

func startChild(s childSpec, exited chan<- error) (*child, error) {
	logFile, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open %s log: %w", s.name, err)
	}
	cmd := exec.Command(s.bin)
	// A service inherits the developer's shell, as any command started
	// from it would: that is how settings the launcher does not make
	// (RATE_LIMIT_PER_MINUTE, OTEL_*) reach it (README). The launcher's own
	// settings come only through run's getenv. Later entries win in
	// os/exec, so the settings made here override whatever the shell
	// happens to export.
	cmd.Env = append(os.Environ(), s.env...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Own process group: Ctrl-C in the terminal reaches only the
		// launcher, which then stops the services in order.
		Setpgid: true,
		// If the launcher is killed outright, the services must not live
		// on holding the ports.
		Pdeathsig: syscall.SIGTERM,
	}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", s.bin, err)
	}
	c := &child{childSpec: s, cmd: cmd, done: make(chan struct{})}
	go func() {
		c.waitErr = cmd.Wait()
		logFile.Close()
		close(c.done)
		if !c.stopping.Load() {
			exited <- fmt.Errorf("%s (pid %d) %s without being asked to stop; last lines of %s:\n%s",
				c.name, cmd.Process.Pid, c.exitStatus(), c.logPath, tail(c.logPath, 20))
		}
	}()
	return c, nil
}

func (c *child) pid() int { return c.cmd.Process.Pid }

// exitStatus says how the process ended ("exited with status 0", "was
// killed by signal 9 (killed)"); valid after done. Wait's error is nil for
// status 0, which would read "<nil>".
func (c *child) exitStatus() string {
	state := c.cmd.ProcessState
	if state == nil {
		// Wait failed before the process was reaped.
		return fmt.Sprintf("ended (%v)", c.waitErr)
	}
	if ws, ok := state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return fmt.Sprintf("was killed by signal %d (%s)", int(ws.Signal()), ws.Signal())
	}
	return fmt.Sprintf("exited with status %d", state.ExitCode())
}

// waitReady polls /readyz until it answers 200, the process dies or timeout
// passes.
func (c *child) waitReady(ctx context.Context, timeout time.Duration) error {
	client := &http.Client{Timeout: time.Second}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	readyURL := c.url + "/readyz"
	last := "no answer yet"
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, readyURL, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("%s %s", resp.Status, bytes.TrimSpace(body))
		} else {
			last = err.Error()
		}
		select {
		case <-c.done:
			return fmt.Errorf("%s %s during start; last lines of %s:\n%s",
				c.name, c.exitStatus(), c.logPath, tail(c.logPath, 20))
		case <-deadline.C:
			return fmt.Errorf("%s not ready within %s at %s (last answer: %s); last lines of %s:\n%s",
				c.name, timeout, readyURL, last, c.logPath, tail(c.logPath, 20))
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", c.name, ctx.Err())
		case <-tick.C:
		}
	}
}

// stop sends SIGTERM and waits up to grace (or ctx) before SIGKILL.
func (c *child) stop(ctx context.Context, grace time.Duration) error {
	select {
	case <-c.done:
		// Already gone; its exit was reported through Exited.
		return nil
	default:
	}
	c.stopping.Store(true)
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		<-c.done
		return nil
	}
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-c.done:
		if c.waitErr != nil {
			return fmt.Errorf("%s (pid %d) did not exit cleanly: it %s; see %s", c.name, c.pid(), c.exitStatus(), c.logPath)
		}
		return nil
	case <-timer.C:
	case <-ctx.Done():
	}
	_ = c.cmd.Process.Kill()
	<-c.done
	return fmt.Errorf("%s (pid %d) did not stop within %s of SIGTERM and was killed; see %s", c.name, c.pid(), grace, c.logPath)
}

// tail returns the last n lines of a log file, indented for error messages.
func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return "    (no log: " + err.Error() + ")"
	}
	defer f.Close()
	const window = 16 << 10
	if st, err := f.Stat(); err == nil && st.Size() > window {
		_, _ = f.Seek(st.Size()-window, io.SeekStart)
	}
	data, _ := io.ReadAll(f)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	if len(lines) == 1 && lines[0] == "" {
		return "    (log is empty)"
	}
	return "    " + strings.Join(lines, "\n    ")
}
