package telemetrytest

import (
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Build builds the command in the working directory (a service's
// cmd/<name> test) into a temporary directory and returns the binary.
func Build(t testing.TB, name string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), name)
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// Process is a service binary running as a process of its own, for tests
// that kill it where no in-process server can be stopped: mid-call, with
// no shutdown at all.
type Process struct {
	URL  string
	Logs *LogBuffer
	cmd  *exec.Cmd
	// done is closed once the process ended, waitErr saying how.
	done    chan struct{}
	waitErr error
}

// StartProcess runs bin with exactly vars as its environment, on a free
// loopback port, and returns once it listens. It is stopped, gracefully,
// when the test ends, unless something killed it before; its log is
// shown when the test failed.
func StartProcess(t testing.TB, bin string, vars map[string]string) *Process {
	t.Helper()
	logs := &LogBuffer{}
	out, listeners := Listening()
	cmd := exec.Command(bin)
	cmd.Env = []string{"HTTP_ADDR=127.0.0.1:0"}
	for k, v := range vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdout = io.MultiWriter(out, logs)
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &Process{cmd: cmd, done: make(chan struct{}), Logs: logs}
	exited := make(chan error, 1)
	go func() {
		p.waitErr = cmd.Wait()
		out.Close()
		exited <- p.waitErr
		close(p.done)
	}()
	name := filepath.Base(bin)
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("%s did not stop on SIGTERM", name)
		}
		if t.Failed() {
			t.Logf("%s's log:\n%s", name, logs)
		}
	})
	addr, _ := listeners.Wait(t, exited, false)
	p.URL = "http://" + addr
	return p
}

// Done is closed once the process ended.
func (p *Process) Done() <-chan struct{} { return p.done }

// Kill sends SIGKILL (no shutdown, nothing flushed or given back) and
// waits for the process to end; any other end fails the test.
func (p *Process) Kill(t testing.TB) {
	t.Helper()
	if err := p.KillNow(); err != nil {
		t.Fatal(err)
	}
}

// KillNow is Kill for a goroutine other than the test's: it reports what
// Kill would fail the test with.
func (p *Process) KillNow() error {
	_ = p.cmd.Process.Kill()
	select {
	case <-p.done:
		if ee, ok := p.waitErr.(*exec.ExitError); !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			return errors.New("the process ended with " + errText(p.waitErr) + ", not SIGKILL")
		}
		return nil
	case <-time.After(10 * time.Second):
		return errors.New("the process is still running 10 s after SIGKILL")
	}
}

func errText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}
