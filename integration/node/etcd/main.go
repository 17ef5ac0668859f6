// Command etcd is etcd's server, built from go.etcd.io/etcd/server/v3 at the version go.mod
// pins. etcd's own module has replace lines, so `go install` of its main package cannot work;
// this main calls the same entry point its etcdmain package gives the upstream binary.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
