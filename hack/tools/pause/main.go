// Command pause is a minimal pod-sandbox process: it sleeps until SIGINT or SIGTERM
// and reaps the zombies of the pod's shared PID namespace.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

var version = "3.10"

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-v" {
		fmt.Println("pause (etcd-autopilot)", version)
		return
	}
	c := make(chan os.Signal, 16)
	signal.Notify(c, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range c {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
