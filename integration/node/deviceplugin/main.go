// Command deviceplugin is braid's test device plugin for the real node (test tooling, never
// shipped): it registers a resource whose device IDs are shaped like PCI addresses, as the
// SR-IOV network device plugin's are, with the real kubelet's device manager (Registration on
// <dir>/kubelet.sock, API v1beta1), lists them healthy and answers Allocate, so that the
// kubelet allocates them to pods and reports them through its PodResources API: what braid's
// delegator reads for networks that name a resource. No hardware is needed: the kubelet checks
// nothing about the IDs.
//
// At Allocate it also writes, for each device, the device-info file the SR-IOV network device
// plugin writes (sriov-network-device-plugin pkg/netdevice/netResourcePool.go
// StoreDeviceInfoFile, through network-attachment-definition-client SaveDeviceInfoForDP):
// <devinfo>/<resource, / as ->-<id>-device.json holding the NPWG device-info spec's
// {"type":"pci","version":"1.1.0","pci":{"pci-address":<id>}}, what a CNI meta-plugin copies to
// the delegate's CNIDeviceInfoFile and puts into network-status. It removes its files when it
// stops, as that plugin's cleanUp does.
//
// Usage: deviceplugin -dir /var/lib/kubelet/device-plugins -resource braid.test/fakevf -count 4
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

type plugin struct {
	pluginapi.UnimplementedDevicePluginServer
	resource string
	devices  []*pluginapi.Device
	devinfo  string
}

// devInfoFile is network-attachment-definition-client's getDPDeviceInfoPath.
func (p *plugin) devInfoFile(id string) string {
	return filepath.Join(p.devinfo, fmt.Sprintf("%s-%s-device.json",
		strings.ReplaceAll(p.resource, "/", "-"), strings.ReplaceAll(id, "/", "-")))
}

// storeDeviceInfo writes a device's file anew (the SR-IOV plugin cleans, then saves; 0444).
func (p *plugin) storeDeviceInfo(id string) error {
	info, err := json.Marshal(map[string]any{"type": "pci", "version": "1.1.0", "pci": map[string]string{"pci-address": id}})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(p.devinfo, 0o755); err != nil {
		return err
	}
	f := p.devInfoFile(id)
	if err := os.Remove(f); err != nil && !os.IsNotExist(err) {
		return err
	}
	return os.WriteFile(f, info, 0o444)
}

func (p *plugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{}, nil
}

// ListAndWatch sends the devices once and keeps the stream open until the kubelet closes it.
func (p *plugin) ListAndWatch(_ *pluginapi.Empty, s grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	if err := s.Send(&pluginapi.ListAndWatchResponse{Devices: p.devices}); err != nil {
		return err
	}
	<-s.Context().Done()
	return nil
}

// Allocate gives each container an environment variable naming its devices, in the SR-IOV
// plugin's manner (PCIDEVICE_<RESOURCE>), so a pod can show what it was given.
func (p *plugin) Allocate(_ context.Context, r *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	env := "PCIDEVICE_" + strings.ToUpper(strings.NewReplacer(".", "_", "/", "_").Replace(p.resource))
	out := &pluginapi.AllocateResponse{}
	for _, c := range r.ContainerRequests {
		log.Printf("Allocate %v", c.DevicesIds)
		if p.devinfo != "" {
			for _, id := range c.DevicesIds {
				if err := p.storeDeviceInfo(id); err != nil {
					return nil, fmt.Errorf("device-info file of %s: %v", id, err)
				}
			}
		}
		out.ContainerResponses = append(out.ContainerResponses, &pluginapi.ContainerAllocateResponse{
			Envs: map[string]string{env: strings.Join(c.DevicesIds, ",")},
		})
	}
	return out, nil
}

func (p *plugin) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	return &pluginapi.PreStartContainerResponse{}, nil
}

func main() {
	dir := flag.String("dir", pluginapi.DevicePluginPath, "the kubelet's device-plugin directory")
	resource := flag.String("resource", "braid.test/fakevf", "the resource name to register")
	count := flag.Int("count", 4, "how many devices (0000:00:1f.1, 0000:00:1f.2, ...)")
	devinfo := flag.String("devinfo", "/var/run/k8s.cni.cncf.io/devinfo/dp", "where Allocate writes the devices' device-info files (empty: none)")
	flag.Parse()
	if *count < 1 || *count > 7 {
		log.Fatalf("-count must be 1 to 7 (functions of one PCI slot), not %d", *count)
	}
	p := &plugin{resource: *resource, devinfo: *devinfo}
	// Listed out of order on purpose: the kubelet and braid must not depend on it.
	for i := *count; i >= 1; i-- {
		p.devices = append(p.devices, &pluginapi.Device{ID: fmt.Sprintf("0000:00:1f.%d", i), Health: pluginapi.Healthy})
	}
	name := "braid-" + strings.NewReplacer(".", "-", "/", "-").Replace(*resource) + ".sock"
	sock := filepath.Join(*dir, name)
	_ = os.Remove(sock)
	l, err := net.Listen("unix", sock)
	if err != nil {
		log.Fatalf("listen %s: %v", sock, err)
	}
	defer os.Remove(sock)
	srv := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(srv, p)
	go func() {
		if err := srv.Serve(l); err != nil {
			log.Printf("serve: %v", err)
		}
	}()
	if err := register(filepath.Join(*dir, "kubelet.sock"), name, *resource); err != nil {
		log.Fatalf("register with the kubelet: %v", err)
	}
	log.Printf("registered %s (%d devices) as %s", *resource, *count, sock)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
	srv.Stop()
	if p.devinfo != "" {
		for _, d := range p.devices {
			_ = os.Remove(p.devInfoFile(d.ID))
		}
	}
}

func register(kubelet, endpoint, resource string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := grpc.NewClient("unix://"+kubelet, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version:      pluginapi.Version,
		Endpoint:     endpoint,
		ResourceName: resource,
	})
	return err
}
