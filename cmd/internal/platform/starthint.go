package platform

import (
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// localInstall is where the hints for a server that is not answering look
// for a Postgres or Redis installed on this machine: a command that would
// start one is only worth printing when it would work here.
type localInstall struct {
	// lookPath finds a command the way the shell that runs the hint would.
	lookPath func(file string) (string, error)
	// listClusters runs Debian's pg_lsclusters without its header: a line
	// per cluster, "version name port status ...", oldest version first.
	listClusters func() ([]byte, error)
}

func thisMachine() *localInstall {
	return &localInstall{
		lookPath:     exec.LookPath,
		listClusters: func() ([]byte, error) { return exec.Command("pg_lsclusters", "--no-header").Output() },
	}
}

// Every line after a hint's first is indented like the first, which the
// preflight's message puts under the error it explains.
const nextHintLine = "\n    "

// postgresStartHint says how to get a Postgres answering at host:port (host
// may be a Unix socket directory): the pg_ctlcluster command of the cluster
// set to that port, or what to install or create when there is none.
func (in *localInstall) postgresStartHint(host string, port uint16) string {
	if !strings.HasPrefix(host, "/") && !isLoopback(host) {
		return fmt.Sprintf("start Postgres at %s, or point PG_URL at a running server",
			net.JoinHostPort(host, strconv.Itoa(int(port))))
	}
	// A fresh Debian cluster still refuses the default PG_URL's login:
	// peer or password authentication, and postgres has no password.
	const installHint = "install it with: apt-get install postgresql (%s)" + nextHintLine +
		"Debian's cluster then wants trust auth in pg_hba.conf, or a password in PG_URL"
	if _, err := in.lookPath("pg_ctlcluster"); err != nil {
		return fmt.Sprintf(installHint, "no pg_ctlcluster on PATH")
	}
	clusters := in.postgresClusters()
	if len(clusters) == 0 {
		return fmt.Sprintf(installHint, "pg_lsclusters lists no cluster")
	}
	// With two versions installed the cluster to start is not
	// `$(ls /etc/postgresql) main` but the one set to PG_URL's port; of
	// several set to it (an upgrade leaves the old one behind, and only
	// one can run), the newest.
	var onPort []postgresCluster
	for _, c := range clusters {
		if c.port == port {
			onPort = append(onPort, c)
		}
	}
	if len(onPort) > 0 {
		c := onPort[len(onPort)-1]
		return fmt.Sprintf("start it with: pg_ctlcluster --skip-systemctl-redirect %s %s start", c.version, c.name)
	}
	found := make([]string, len(clusters))
	for i, c := range clusters {
		found[i] = fmt.Sprintf("%s/%s on %d", c.version, c.name, c.port)
	}
	// Named after the port, so it cannot be a cluster that already exists:
	// each of those is on another port.
	return fmt.Sprintf("no Postgres cluster here is set to port %d (found %s): change the port in PG_URL,",
		port, strings.Join(found, ", ")) + nextHintLine +
		fmt.Sprintf("or create a cluster on %d with: pg_createcluster --start -p %d %s esim%d", port, port, clusters[len(clusters)-1].version, port)
}

// postgresCluster is one of Debian's Postgres clusters, as pg_ctlcluster
// names it, and the port it is configured to listen on.
type postgresCluster struct {
	version, name string
	port          uint16
}

// postgresClusters lists this machine's clusters, oldest version first.
func (in *localInstall) postgresClusters() []postgresCluster {
	out, err := in.listClusters()
	if err != nil {
		return nil
	}
	var clusters []postgresCluster
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		if port, err := strconv.ParseUint(f[2], 10, 16); err == nil {
			clusters = append(clusters, postgresCluster{version: f[0], name: f[1], port: uint16(port)})
		}
	}
	return clusters
}

// redisStartHint says how to get a Redis at the address REDIS_URL names: a
// local command for a loopback address or Unix socket, after installing
// redis-server when it is missing; otherwise where it is expected to run.
func (in *localInstall) redisStartHint(opts *redis.Options) string {
	const flags = `--save "" --appendonly no`
	var start string
	if opts.Network == "unix" {
		start = fmt.Sprintf("start it with: redis-server --daemonize yes --port 0 --unixsocket %s %s", opts.Addr, flags)
	} else {
		host, port, err := net.SplitHostPort(opts.Addr)
		if err != nil || !isLoopback(host) {
			return fmt.Sprintf("start Redis at %s, or point REDIS_URL at a running server", opts.Addr)
		}
		if host == "localhost" {
			host = "127.0.0.1" // redis-server binds addresses, not names
		}
		start = fmt.Sprintf("start it with: redis-server --daemonize yes --bind %s --port %s %s", host, port, flags)
	}
	if _, err := in.lookPath("redis-server"); err != nil {
		return "install it with: apt-get install redis-server (no redis-server on PATH)" + nextHintLine + "then " + start
	}
	return start
}
