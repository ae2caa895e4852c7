/**
 * The local node's fixed settings (its network, ports and sandbox image) and the configuration files node.ts
 * writes for containerd, the kubelet and the bridge CNI network before starting them.
 */
import { stringify } from 'yaml';

/** The node network: a Linux bridge whose gateway address the API server (and PostgreSQL) serve on. */
export const NODE_BRIDGE = 'gitops-br0';
export const NODE_SUBNET = '10.203.77.0/26';
export const NODE_GATEWAY = '10.203.77.1';
/** The node's name and address (`--hostname-override`): the kubelet serves on loopback only. */
export const NODE_NAME = '127.0.0.1';
/** Cluster mode's fixed API server port on the gateway address (the manifests' local-cluster overlay uses it). */
export const CLUSTER_API_PORT = 16443;
/** The sandbox image (`pnpm images` builds it from images/pause). */
export const PAUSE_IMAGE = 'gitops-service/pause:local';
export const CNI_DIR = '/usr/lib/cni';
export const KUBELET_PORT = 20250;
export const KUBELET_HEALTHZ_PORT = 20248;
export function containerdConfig(state: string): string {
  return `version = 2
root = "${state}/containerd/root"
state = "${state}/containerd/state"
[grpc]
  address = "${state}/containerd/containerd.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "${PAUSE_IMAGE}"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  # no CAP_SYS_RESOURCE in a container: a negative oom_score_adj would make runc fail every sandbox
  restrict_oom_score_adj = true
  # Pod network namespaces under our state, insulated from \`ip netns\`
  netns_mounts_under_state_dir = true
  tolerate_missing_hugetlb_controller = true
  disable_hugetlb_controller = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "${CNI_DIR}"
    conf_dir = "${state}/cni/net.d"
`;
}

export function kubeletConfig(state: string, caFile: string): string {
  return stringify({
    apiVersion: 'kubelet.config.k8s.io/v1beta1',
    kind: 'KubeletConfiguration',
    // Required on these machines: cgroup v1 hosts, no systemd, containerd 1.6, no CAP_SYS_RESOURCE.
    failCgroupV1: false,
    cgroupDriver: 'cgroupfs',
    failSwapOn: false,
    oomScoreAdj: 0,
    containerRuntimeEndpoint: `unix://${state}/containerd/containerd.sock`,
    // Loopback only.
    address: '127.0.0.1',
    port: KUBELET_PORT,
    readOnlyPort: 0,
    healthzBindAddress: '127.0.0.1',
    healthzPort: KUBELET_HEALTHZ_PORT,
    // The API server presents a client certificate of our CA (group system:masters); others are asked about.
    authentication: {
      anonymous: { enabled: false },
      webhook: { enabled: true },
      x509: { clientCAFile: caFile },
    },
    authorization: { mode: 'Webhook' },
    podLogsDir: `${state}/pod-logs`,
    serializeImagePulls: false,
    registerNode: true,
    clusterDomain: 'cluster.local',
    resolvConf: '/etc/resolv.conf',
    evictionHard: {
      'memory.available': '100Mi',
      'nodefs.available': '2%',
      'imagefs.available': '2%',
      'nodefs.inodesFree': '2%',
    },
    // Imported images cannot be pulled again: keep image garbage collection out of the way.
    imageGCHighThresholdPercent: 99,
    imageGCLowThresholdPercent: 98,
    nodeStatusUpdateFrequency: '5s',
    syncFrequency: '10s',
  });
}

export function cniConfig(state: string): string {
  return JSON.stringify(
    {
      cniVersion: '1.0.0',
      name: 'gitops-local',
      plugins: [
        {
          type: 'bridge',
          bridge: NODE_BRIDGE,
          isGateway: true,
          isDefaultGateway: false,
          ipMasq: false,
          hairpinMode: false,
          ipam: { type: 'host-local', ranges: [[{ subnet: NODE_SUBNET }]], dataDir: `${state}/cni/ipam` },
        },
        // Pod to Pod traffic crosses the bridge through the host's FORWARD chain (br_netfilter), whose policy
        // the Docker engine sets to DROP: the firewall plugin accepts each Pod's traffic there (its own
        // CNI-FORWARD chain, rules removed with the Pod). Pod to host traffic never needed it.
        { type: 'firewall', backend: 'iptables' },
      ],
    },
    null,
    2,
  );
}
