/// Real outputs the container-test readings are tested on: what podman 4.3, Linux and `kubectl kustomize`
/// printed on this project's machines (the Kubernetes rendering of the documented kustomization, trimmed to the
/// documents the run reads; its Deployments to their heads).
enum ContainerTestFixtures {
    /// `podman image inspect localhost/duo-deploy-relay:cache` of an image built by the documented build.
    static let imageInspect = """
        [
          {
            "Id": "a83764aae41126cb7868d5d9f9ef81a7502c284e536bb611b8668312bfc26c18",
            "RepoTags": [
              "localhost/duo-deploy-relay:cache"
            ],
            "Created": "2026-12-05T00:28:45.591105882Z",
            "Config": {
              "User": "10001:10001",
              "ExposedPorts": {
                "8787/tcp": {}
              },
              "Env": [
                "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
              ],
              "Entrypoint": [
                "duo-relay"
              ],
              "Cmd": [
                "serve",
                "--config",
                "/etc/duo-relay/relay.json"
              ],
              "Labels": {
                "io.buildah.version": "1.28.2"
              }
            },
            "Architecture": "amd64",
            "Os": "linux",
            "Size": 259620349,
            "User": "10001:10001"
          }
        ]

        """

    /// `/proc/PID/status` of a process started by `podman run --read-only --cap-drop ALL --security-opt no-new-privileges --user 10001:10001`.
    static let confinedStatus = """
        Name:	catatonit
        Umask:	0022
        State:	S (sleeping)
        Tgid:	425
        Ngid:	0
        Pid:	425
        PPid:	412
        TracerPid:	0
        Uid:	10001	10001	10001	10001
        Gid:	10001	10001	10001	10001
        FDSize:	64
        Groups:	10001 
        NStgid:	425	1
        NSpid:	425	1
        NSpgid:	425	1
        NSsid:	425	1
        Kthread:	0
        VmPeak:	    1012 kB
        VmSize:	    1012 kB
        VmLck:	       0 kB
        VmPin:	       0 kB
        VmHWM:	     660 kB
        VmRSS:	     660 kB
        RssAnon:	      48 kB
        RssFile:	     612 kB
        RssShmem:	       0 kB
        VmData:	     172 kB
        VmStk:	     132 kB
        VmExe:	     492 kB
        VmLib:	       8 kB
        VmPTE:	      40 kB
        VmSwap:	       0 kB
        HugetlbPages:	       0 kB
        CoreDumping:	0
        THP_enabled:	1
        untag_mask:	0xffffffffffffffff
        Threads:	1
        SigQ:	0/96368
        SigPnd:	0000000000000000
        ShdPnd:	0000000000000000
        SigBlk:	fffffffe3ffbfa07
        SigIgn:	0000000000000000
        SigCgt:	0000000000000000
        CapInh:	0000000000000000
        CapPrm:	0000000000000000
        CapEff:	0000000000000000
        CapBnd:	0000000000000000
        CapAmb:	0000000000000000
        NoNewPrivs:	1
        Seccomp:	2
        Seccomp_filters:	1
        Speculation_Store_Bypass:	vulnerable
        SpeculationIndirectBranch:	always enabled
        Cpus_allowed:	3
        Cpus_allowed_list:	0-1
        Mems_allowed:	00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000001
        Mems_allowed_list:	0
        voluntary_ctxt_switches:	22
        nonvoluntary_ctxt_switches:	134

        """

    /// `/proc/PID/limits` of the same process (`--ulimit core=0`).
    static let confinedLimits = """
        Limit                     Soft Limit           Hard Limit           Units     
        Max cpu time              unlimited            unlimited            seconds   
        Max file size             unlimited            unlimited            bytes     
        Max data size             unlimited            unlimited            bytes     
        Max stack size            8388608              unlimited            bytes     
        Max core file size        0                    0                    bytes     
        Max resident set          unlimited            unlimited            bytes     
        Max processes             4096                 4096                 processes 
        Max open files            20000                20000                files     
        Max locked memory         8388608              8388608              bytes     
        Max address space         unlimited            unlimited            bytes     
        Max file locks            unlimited            unlimited            locks     
        Max pending signals       96368                96368                signals   
        Max msgqueue size         819200               819200               bytes     
        Max nice priority         0                    0                    
        Max realtime priority     0                    0                    
        Max realtime timeout      unlimited            unlimited            us        

        """

    /// `kubectl kustomize` of the documented operator's directory (placeholder secrets).
    static let rendering = """
        apiVersion: v1
        kind: Namespace
        metadata:
          labels:
            app.kubernetes.io/name: duo-relay
            pod-security.kubernetes.io/enforce: restricted
            pod-security.kubernetes.io/enforce-version: latest
          name: duo-relay
        ---
        apiVersion: v1
        data:
          relay.json: |
            {
              "listen": "0.0.0.0:8787",
              "metrics_listen": "0.0.0.0:9787",
              "grant_lifetime_s": 2592000,
              "grant_key_id": 1,
              "push_limit": { "requests": 20, "period_s": 60 },
              "ip_limit": { "requests": 10, "period_s": 10, "block_s": 10, "client_ip_header": "X-Forwarded-For" },
              "apns": {
                "topic": "app.openduo.pocket",
                "placeholder": "PUSH",
                "expiration_s": 86400,
                "timeout_ms": 10000,
                "max_connections": 2
              },
              "server": {
                "max_connections": 16384,
                "max_connections_per_address": 0,
                "connection_timeout_s": 30,
                "max_pushes_in_flight": 8192,
                "shutdown_grace_s": 10,
                "threads": 2
              },
              "limits_store": {
                "kind": "redis",
                "url": "redis://duo-relay-redis:6379/0",
                "timeout_ms": 100,
                "on_failure": "local",
                "key_prefix": "duo-relay:"
              }
            }
        kind: ConfigMap
        metadata:
          name: duo-relay-config-gh5hhb2766
          namespace: duo-relay
        ---
        apiVersion: v1
        data:
          redis.conf: |
            # Redis for duo-relay's limits: windows of seconds, nothing kept on disk (a restart only lets
            # phones and addresses start afresh). The password is not here: redis.yaml's command reads it from
            # the Secret's file at start and hands it to redis-server on standard input (the "-" argument),
            # so it is in no file of the ConfigMap and on no command line.
            bind * -::*
            port 6379
            protected-mode yes
            save ""
            appendonly no
            maxmemory 128mb
            maxmemory-policy volatile-ttl
        kind: ConfigMap
        metadata:
          name: duo-relay-redis-config-m4m497kt68
          namespace: duo-relay
        ---
        apiVersion: v1
        data:
          APNS_KEY_ID_PRODUCTION: eC1BUE5TX0tFWV9JRF9QUk9EVUNUSU9O
          APNS_KEY_PRODUCTION: eC1BUE5TX0tFWV9QUk9EVUNUSU9O
          APNS_TEAM_ID: eC1BUE5TX1RFQU1fSUQ=
          REDIS_PASSWORD: eC1SRURJU19QQVNTV09SRA==
          RELAY_KEYS: eC1SRUxBWV9LRVlT
        kind: Secret
        metadata:
          name: duo-relay-secrets-gm9fkkb82d
          namespace: duo-relay
        type: Opaque
        ---
        apiVersion: v1
        kind: Service
        metadata:
          labels:
            app.kubernetes.io/name: duo-relay
          name: duo-relay
          namespace: duo-relay
        spec:
          ports:
          - name: http
            port: 8787
            protocol: TCP
            targetPort: http
          selector:
            app.kubernetes.io/name: duo-relay
          type: ClusterIP
        ---
        apiVersion: v1
        kind: Service
        metadata:
          labels:
            app.kubernetes.io/name: duo-relay-redis
          name: duo-relay-redis
          namespace: duo-relay
        spec:
          ports:
          - name: redis
            port: 6379
            targetPort: redis
          selector:
            app.kubernetes.io/name: duo-relay-redis
        ---
        apiVersion: apps/v1
        kind: Deployment
        metadata:
          labels:
            app.kubernetes.io/name: duo-relay
          name: duo-relay
          namespace: duo-relay
        spec:
          replicas: 2
          revisionHistoryLimit: 5
          selector:
            matchLabels:
        ---
        apiVersion: apps/v1
        kind: Deployment
        metadata:
          labels:
            app.kubernetes.io/name: duo-relay-redis
          name: duo-relay-redis
          namespace: duo-relay
        spec:
          replicas: 1
          selector:
            matchLabels:
              app.kubernetes.io/name: duo-relay-redis

        """
}
