// Command pause holds a pod sandbox's namespaces, as registry.k8s.io/pause does: it sleeps as
// PID 1, reaps the children that the pod's containers leave to it (shareProcessNamespace), and
// exits on SIGINT or SIGTERM so that stopping the sandbox is quick. Written here because no
// registry is reachable from these machines; it does what build/pause/linux/pause.c does.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if os.Getpid() != 1 {
		os.Stderr.WriteString("pause: warning: not pid 1\n")
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
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
