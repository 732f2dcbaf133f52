package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// The baseline runs in its own process, like the gateway, so both compete
// for the same two cores with the load generator in the same way and their
// memory can be read separately.
const serveBareFlag = "serve-bare"

// bareHandler is the baseline: a plain net/http handler answering every
// request with the bytes in bodyPath.
func bareHandler(bodyPath string) (http.Handler, error) {
	body, err := os.ReadFile(bodyPath)
	if err != nil {
		return nil, err
	}
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}), nil
}

// childProcess is a running helper server: the baseline.
type childProcess struct {
	cmd   *exec.Cmd
	stdin io.Closer
	url   string
}

// startChild re-executes this binary with args, which make it serve one
// helper, and waits for the address it announces.
func startChild(name string, args ...string) (*childProcess, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, args...)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
	if err != nil || !ok {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("%s did not announce its address (got %q): %v", name, line, err)
	}
	return &childProcess{cmd: cmd, stdin: stdin, url: "http://" + addr}, nil
}

func (b *childProcess) pid() int { return b.cmd.Process.Pid }

func (b *childProcess) stop() error {
	_ = b.stdin.Close()
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- b.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(5 * time.Second):
		_ = b.cmd.Process.Kill()
		return <-done
	}
}

// serveChild serves h on a loopback port it announces on stdout, until
// SIGTERM or its parent goes away (stdin closes).
func serveChild(ctx context.Context, h http.Handler, stdout io.Writer, stdin io.Reader) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stdout, "listening %s\n", ln.Addr())
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		_, _ = io.Copy(io.Discard, stdin)
		cancel()
	}()
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
