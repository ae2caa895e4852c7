// A Pod's sandbox process for the local cluster's node: it holds the Pod's namespaces, reaps the
// zombies it inherits as PID 1 and exits on SIGINT/SIGTERM. Built static (CGO_ENABLED=0).
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	children := make(chan os.Signal, 1)
	signal.Notify(children, syscall.SIGCHLD)
	for {
		select {
		case <-stop:
			os.Exit(0)
		case <-children:
			for {
				var status syscall.WaitStatus
				pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
				if pid <= 0 || err != nil {
					break
				}
			}
		}
	}
}
