package main

import "syscall"

// redisProcAttr puts redis-server in a process group of its own (see
// startRedis) and has the kernel stop it if the demo dies without
// stopping it (kill -9), since a signal to the demo's group no longer
// reaches it.
func redisProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
