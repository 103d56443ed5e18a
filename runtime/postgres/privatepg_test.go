package postgres_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// privatePostgres is a PostgreSQL server of the test's own: initdb into a
// directory of its own, listening on a free port of 127.0.0.1 with trust
// auth. A test that stops or restarts a server uses one, never the
// machine's shared cluster, which other tests are using.
type privatePostgres struct {
	t    testing.TB
	dir  string
	data string
	bin  string
	Port int
}

// startPrivatePostgres initialises and starts a server under dir, stopped
// when the test ends. The server runs as the postgres user when the test
// runs as root, since PostgreSQL refuses to run as root.
func startPrivatePostgres(t testing.TB, dir string) *privatePostgres {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(bins) == 0 {
		t.Fatal("no initdb under /usr/lib/postgresql/*/bin: the Debian postgresql package is needed")
	}
	p := &privatePostgres{t: t, dir: dir, data: filepath.Join(dir, "pgdata"), bin: filepath.Dir(bins[len(bins)-1])}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.Port = ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if out, err := exec.Command("chown", "-R", "postgres:postgres", dir).CombinedOutput(); err != nil {
			t.Fatalf("chown %s: %v: %s", dir, err, out)
		}
	}
	p.run("initdb", "-D", p.data, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8")
	p.Start()
	t.Cleanup(p.stopQuietly)
	return p
}

// run runs one of the server's programs, as the postgres user when root.
func (p *privatePostgres) run(prog string, args ...string) {
	p.t.Helper()
	if err := p.try(prog, args...); err != nil {
		p.t.Fatal(err)
	}
}

func (p *privatePostgres) try(prog string, args ...string) error {
	path := filepath.Join(p.bin, prog)
	var cmd *exec.Cmd
	if os.Geteuid() == 0 {
		cmd = exec.Command("runuser", append([]string{"-u", "postgres", "--", path}, args...)...)
	} else {
		cmd = exec.Command(path, args...)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %v: %v: %s", prog, args, err, out)
	}
	return nil
}

// Start starts the stopped server and waits until it accepts connections.
func (p *privatePostgres) Start() {
	p.t.Helper()
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c max_connections=300", p.Port, p.dir)
	p.run("pg_ctl", "-D", p.data, "-l", filepath.Join(p.dir, "server.log"), "-o", opts, "-w", "-t", "60", "start")
}

// Stop stops the server: mode "fast" is a clean shutdown, "immediate" one
// that leaves crash recovery from the WAL to the next start.
func (p *privatePostgres) Stop(mode string) {
	p.t.Helper()
	p.run("pg_ctl", "-D", p.data, "-m", mode, "-w", "-t", "60", "stop")
}

func (p *privatePostgres) stopQuietly() {
	if err := p.try("pg_ctl", "-D", p.data, "-m", "immediate", "-w", "stop"); err != nil {
		p.t.Logf("stopping the private PostgreSQL: %v", err)
	}
}

// URL is the connection string of database on this server, reached at
// host:port (the server's own address, or a proxy in front of it).
func (p *privatePostgres) URL(hostPort, database string) string {
	if hostPort == "" {
		hostPort = net.JoinHostPort("127.0.0.1", strconv.Itoa(p.Port))
	}
	return "postgres://postgres@" + hostPort + "/" + database + "?sslmode=disable"
}

// CreateDatabase creates database on the server.
func (p *privatePostgres) CreateDatabase(database string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, p.URL("", "postgres"))
	if err != nil {
		p.t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{database}.Sanitize()); err != nil {
		p.t.Fatal(err)
	}
}
