//go:build !linux

package main

import "syscall"

// redisProcAttr puts redis-server in a process group of its own (see
// startRedis).
func redisProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
