// SPIKE, not product code: a toy FUSE filesystem served over FUSE-over-io_uring
// (or the classic /dev/fuse read loop) to answer issue 33 item 1's unknowns on
// this kernel. Four files: "hello" (static text), "stats" (how many requests
// each transport served), "hang" (a READ that is never answered, to leave a
// request in flight for the teardown tests), "pass" (FUSE_PASSTHROUGH to a
// file in /dev/shm). See README.md beside it.
//
//   uring_spike serve MNT ring|classic [handover|handover-adopt[-noprime]]
//   uring_spike bench FILE N        fstat() N times, prints µs per round trip
//
// "handover": before serving, fork a successor that holds the same /dev/fuse
// file (as boundfs' supervisor does) and waits for SIGUSR1; then it sends
// FUSE_NOTIFY_RESEND, registers its own ring (in ring mode) and serves,
// answering "hang" too. "handover-adopt": the ring buffers live in a shared
// memfd at a fixed address (inherited by the fork here; a new binary would map
// requests the dead owner left in its entries with COMMIT_AND_FETCH; the
// successor execs itself and maps the passed memfd at the owner's address,
// then primes every queue with a STATFS from that CPU ("-noprime": not).
// SIGUSR2 to the owner closes its io_urings while it stays alive (the
// planned hand-over), printing "rings-closed".
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

// FUSE-over-io_uring ABI (include/uapi/linux/fuse.h, 7.42); Debian 12's
// header is 7.38 and lacks it.
#define SPIKE_OVER_IO_URING (1ULL << 41)
#define SPIKE_CMD_REGISTER 1
#define SPIKE_CMD_COMMIT_AND_FETCH 2
#define SPIKE_NOTIFY_RESEND 7
// Passthrough (7.40): INIT flag, FOPEN flag, the backing ioctl and its map.
#define SPIKE_PASSTHROUGH (1ULL << 37)
#define SPIKE_FOPEN_PASSTHROUGH (1 << 7)
struct backing_map {
	int32_t fd;
	uint32_t flags;
	uint64_t padding;
};
#define SPIKE_DEV_IOC_BACKING_OPEN _IOW(229, 1, struct backing_map)
// "pass" is served by passthrough from this file, whose text the daemon never
// produces itself: reading it back through the mount proves no READ was sent.
static const char PASS_FILE[] = "/dev/shm/uring-spike-passthrough";
struct ent_in_out {
	uint64_t flags, commit_id;
	uint32_t payload_sz, padding;
	uint64_t reserved;
};
struct req_header {
	char in_out[128];
	char op_in[128];
	struct ent_in_out ent;
};
struct cmd_req {
	uint64_t flags, commit_id;
	uint16_t qid;
	uint8_t padding[6];
};

#define ENTS_PER_QUEUE 2
#define PAYLOAD (1 << 20)
#define MAX_WRITE (128 << 10)
static const char HELLO[] = "hello through the spike\n";
static int devfd = -1;
static int use_ring, successor;
static atomic_long served_ring, served_dev;
static int nr_queues;

static void die(const char *what, int err) {
	fprintf(stderr, "spike[%d]: %s: %s\n", getpid(), what, strerror(err));
	exit(1);
}

// Size of in_args[0] (what the ring puts in op_in) for the opcodes served.
static size_t arg0_size(uint32_t op) {
	switch (op) {
	case FUSE_GETATTR: return sizeof(struct fuse_getattr_in);
	case FUSE_OPEN: case FUSE_OPENDIR: return sizeof(struct fuse_open_in);
	case FUSE_READ: return sizeof(struct fuse_read_in);
	case FUSE_RELEASE: case FUSE_RELEASEDIR: return sizeof(struct fuse_release_in);
	case FUSE_FLUSH: return sizeof(struct fuse_flush_in);
	default: return 0; // LOOKUP (6.14+: zero-size arg0, name in payload), STATFS
	}
}

static void fill_attr(uint64_t ino, struct fuse_attr *a) {
	memset(a, 0, sizeof(*a));
	a->ino = ino;
	a->nlink = 1;
	a->blksize = 4096;
	if (ino == 1) {
		a->mode = S_IFDIR | 0755;
		a->nlink = 2;
	} else {
		a->mode = S_IFREG | 0444;
		struct stat st;
		a->size = ino == 2 ? sizeof(HELLO) - 1 : 4096;
		if (ino == 5 && !stat(PASS_FILE, &st))
			a->size = st.st_size;
	}
}

// One request: header, arg0, the rest; writes the reply body into out.
// Returns -errno, or the reply body's length; 1 << 30 means "do not answer".
#define NO_REPLY (1 << 30)
static int handle(const struct fuse_in_header *ih, const char *arg0, const char *rest,
		  char *out) {
	switch (ih->opcode) {
	case FUSE_LOOKUP: {
		uint64_t ino = !strcmp(rest, "hello") ? 2 : !strcmp(rest, "stats") ? 3
			     : !strcmp(rest, "hang") ? 4 : !strcmp(rest, "pass") ? 5 : 0;
		if (ih->nodeid != 1 || !ino)
			return -ENOENT;
		struct fuse_entry_out *e = (void *)out;
		memset(e, 0, sizeof(*e));
		e->nodeid = ino;
		e->generation = 1;
		fill_attr(ino, &e->attr); // entry and attr timeouts 0: every stat asks
		return sizeof(*e);
	}
	case FUSE_GETATTR: {
		struct fuse_attr_out *a = (void *)out;
		memset(a, 0, sizeof(*a));
		fill_attr(ih->nodeid, &a->attr);
		return sizeof(*a);
	}
	case FUSE_OPEN: case FUSE_OPENDIR: {
		struct fuse_open_out *o = (void *)out;
		memset(o, 0, sizeof(*o));
		o->open_flags = ih->opcode == FUSE_OPEN ? FOPEN_DIRECT_IO : 0;
		if (ih->nodeid == 5) { // passthrough: register the backing file, hand its id
			int bfd = open(PASS_FILE, O_RDONLY);
			struct backing_map map = {.fd = bfd};
			int id = bfd < 0 ? -1 : ioctl(devfd, SPIKE_DEV_IOC_BACKING_OPEN, &map);
			int e = errno;
			if (bfd >= 0)
				close(bfd);
			if (id < 0)
				return -e;
			o->open_flags = SPIKE_FOPEN_PASSTHROUGH;
			o->padding = id; // backing_id in 7.40's layout
		}
		return sizeof(*o);
	}
	case FUSE_READ: {
		const struct fuse_read_in *r = (const void *)arg0;
		char buf[256];
		int n;
		if (ih->nodeid == 4 && !successor) {
			printf("parked unique=%llu\n", (unsigned long long)ih->unique);
			fflush(stdout);
			return NO_REPLY;
		}
		if (ih->nodeid == 2)
			n = snprintf(buf, sizeof(buf), "%s", HELLO);
		else if (ih->nodeid == 3)
			n = snprintf(buf, sizeof(buf), "pid=%d ring=%ld dev=%ld\n", getpid(),
				     atomic_load(&served_ring), atomic_load(&served_dev));
		else
			n = snprintf(buf, sizeof(buf), "answered by successor pid=%d\n", getpid());
		if (r->offset >= (uint64_t)n)
			return 0;
		n -= r->offset;
		if ((uint32_t)n > r->size)
			n = r->size;
		memcpy(out, buf + r->offset, n);
		return n;
	}
	case FUSE_RELEASE: case FUSE_RELEASEDIR: case FUSE_FLUSH:
		return 0;
	case FUSE_STATFS: {
		struct fuse_statfs_out *o = (void *)out;
		memset(o, 0, sizeof(*o));
		o->st.bsize = o->st.frsize = 4096;
		o->st.namelen = 255;
		return sizeof(*o);
	}
	default:
		return -ENOSYS;
	}
}

// Ring buffers: plain heap, or ("adopt") a shared memfd mapped at a fixed
// address, two generations of slots (owner, successor) plus one in-flight flag
// per slot, so a successor that maps the same memory at the same address can
// answer what the dead owner left in its entries.
#define SHM_ADDR ((char *)0x6f0000000000UL)
#define SLOT (4096 + PAYLOAD)
static int adopt, prime, memfd = -1;
// Planned hand-over (SIGUSR2 to the owner): every queue thread closes its
// io_uring while the process stays alive.
static volatile sig_atomic_t closing;
static pid_t qtids[64];
static atomic_int nr_closed;
static char *shm;
static volatile uint32_t *inflight; // [gen][qid][entry], in the shared page

struct queue {
	int qid, nents;
	struct io_uring ring;
	struct req_header *hdr[2 * ENTS_PER_QUEUE];
	char *payload[2 * ENTS_PER_QUEUE];
	struct iovec iov[2 * ENTS_PER_QUEUE][2];
	int slot[2 * ENTS_PER_QUEUE];
	atomic_int registered;
};

static void prep_cmd(struct queue *q, int e, uint32_t op, uint64_t commit_id) {
	struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);
	if (!sqe)
		die("io_uring_get_sqe", EBUSY);
	memset(sqe, 0, 128); // SQE128: the command area is the second 64 bytes
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = devfd;
	sqe->cmd_op = op;
	sqe->addr = (uint64_t)(uintptr_t)q->iov[e];
	sqe->len = 2;
	sqe->user_data = e;
	struct cmd_req *c = (struct cmd_req *)sqe->cmd;
	c->qid = q->qid;
	c->commit_id = commit_id;
}

static void set_entry(struct queue *q, int e, int slot) {
	q->slot[e] = slot;
	if (adopt) {
		q->hdr[e] = (void *)(shm + 4096 + (size_t)slot * SLOT);
		q->payload[e] = shm + 4096 + (size_t)slot * SLOT + 4096;
	} else {
		q->hdr[e] = aligned_alloc(4096, 4096);
		q->payload[e] = aligned_alloc(4096, PAYLOAD);
	}
	q->iov[e][0] = (struct iovec){q->hdr[e], sizeof(struct req_header)};
	q->iov[e][1] = (struct iovec){q->payload[e], PAYLOAD};
}

// Answer the request in entry e and submit COMMIT_AND_FETCH (or park it).
static void serve_entry(struct queue *q, int e) {
	struct req_header *h = q->hdr[e];
	struct fuse_in_header ih;
	memcpy(&ih, h->in_out, sizeof(ih));
	q->payload[e][h->ent.payload_sz < PAYLOAD ? h->ent.payload_sz : PAYLOAD - 1] = 0;
	atomic_fetch_add(&served_ring, 1);
	if (adopt)
		inflight[q->slot[e]] = 1;
	int n = handle(&ih, h->op_in, q->payload[e], q->payload[e]);
	if (n == NO_REPLY)
		return; // entry stays with userspace, request in flight
	struct fuse_out_header oh = {.unique = ih.unique, .error = n < 0 ? n : 0,
				     .len = sizeof(oh) + (n > 0 ? n : 0)};
	memcpy(h->in_out, &oh, sizeof(oh));
	h->ent.payload_sz = n > 0 ? n : 0;
	if (adopt)
		inflight[q->slot[e]] = 0;
	prep_cmd(q, e, SPIKE_CMD_COMMIT_AND_FETCH, h->ent.commit_id);
	int err = io_uring_submit(&q->ring);
	if (err < 0)
		die("io_uring_submit(COMMIT_AND_FETCH)", -err);
}

static void *queue_thread(void *arg) {
	struct queue *q = arg;
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(q->qid, &set);
	pthread_setaffinity_np(pthread_self(), sizeof(set), &set); // serve on the caller's CPU
	int err = io_uring_queue_init(16, &q->ring, IORING_SETUP_SQE128 | IORING_SETUP_SINGLE_ISSUER
						    | IORING_SETUP_COOP_TASKRUN);
	if (err)
		die("io_uring_queue_init", -err);
	int gen = successor;
	for (int e = 0; e < ENTS_PER_QUEUE; e++) {
		set_entry(q, e, (gen * nr_queues + q->qid) * ENTS_PER_QUEUE + e);
		prep_cmd(q, e, SPIKE_CMD_REGISTER, 0);
	}
	q->nents = ENTS_PER_QUEUE;
	err = io_uring_submit(&q->ring);
	if (err < 0)
		die("io_uring_submit(REGISTER)", -err);
	if (adopt && successor) { // answer what the dead owner left in its entries
		for (int e = 0; e < ENTS_PER_QUEUE; e++) {
			int old = q->qid * ENTS_PER_QUEUE + e;
			if (!inflight[old])
				continue;
			int me = q->nents++;
			set_entry(q, me, old);
			fprintf(stderr, "spike[%d]: adopting queue %d entry %d (commit_id %llu)\n",
				getpid(), q->qid, e, (unsigned long long)q->hdr[me]->ent.commit_id);
			serve_entry(q, me);
		}
	}
	if (q->qid < 64)
		qtids[q->qid] = gettid();
	atomic_store(&q->registered, 1);
	for (;;) {
		struct io_uring_cqe *cqe;
		err = io_uring_wait_cqe(&q->ring, &cqe);
		if (err == -EINTR && closing) {
			io_uring_queue_exit(&q->ring);
			if (atomic_fetch_add(&nr_closed, 1) + 1 == nr_queues) {
				printf("rings-closed\n");
				fflush(stdout);
			}
			for (;;)
				pause();
		}
		if (err == -EINTR)
			continue;
		if (err)
			die("io_uring_wait_cqe", -err);
		int e = (int)cqe->user_data, res = cqe->res;
		io_uring_cqe_seen(&q->ring, cqe);
		if (res < 0) {
			fprintf(stderr, "spike[%d]: queue %d entry %d: %s\n", getpid(), q->qid, e,
				strerror(-res));
			continue;
		}
		serve_entry(q, e);
	}
	return NULL;
}

static struct queue *start_ring(void) {
	struct queue *qs = calloc(nr_queues, sizeof(*qs));
	for (int i = 0; i < nr_queues; i++) {
		pthread_t t;
		qs[i].qid = i;
		pthread_create(&t, NULL, queue_thread, &qs[i]);
	}
	for (int i = 0; i < nr_queues; i++)
		while (!atomic_load(&qs[i].registered))
			usleep(1000);
	return qs;
}

// The classic loop; in ring mode it serves what still comes over /dev/fuse
// (INIT, FORGET, INTERRUPT, anything before every queue is registered).
static void dev_loop(int after_init_ring) {
	static char buf[PAYLOAD + 4096];
	char out[PAYLOAD];
	for (;;) {
		ssize_t r = read(devfd, buf, sizeof(buf));
		if (r < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			if (errno == ENODEV)
				exit(0);
			die("read /dev/fuse", errno);
		}
		struct fuse_in_header *ih = (void *)buf;
		if (ih->opcode == FUSE_INIT) {
			const struct fuse_init_in *in = (void *)(ih + 1);
			struct {
				struct fuse_out_header h;
				struct fuse_init_out o;
			} rep = {0};
			rep.h = (struct fuse_out_header){sizeof(rep), 0, ih->unique};
			rep.o.major = 7;
			rep.o.minor = in->minor < 42 ? in->minor : 42;
			rep.o.max_readahead = in->max_readahead;
			rep.o.flags = FUSE_INIT_EXT;
			rep.o.flags2 = (use_ring ? (uint32_t)(SPIKE_OVER_IO_URING >> 32) : 0) |
				       (uint32_t)(SPIKE_PASSTHROUGH >> 32);
			rep.o.unused[0] = 1; // max_stack_depth (7.40): backing files on a plain fs
			rep.o.max_background = 16;
			rep.o.congestion_threshold = 12;
			rep.o.max_write = MAX_WRITE;
			rep.o.time_gran = 1;
			if (write(devfd, &rep, sizeof(rep)) < 0)
				die("write INIT reply", errno);
			fprintf(stderr, "spike[%d]: INIT kernel 7.%u flags2 offered %#x\n", getpid(),
				in->minor, in->flags2);
			if (after_init_ring) {
				start_ring();
				fprintf(stderr, "spike[%d]: ring registered, %d queues x %d entries\n",
					getpid(), nr_queues, ENTS_PER_QUEUE);
			}
			printf("ready\n");
			fflush(stdout);
			continue;
		}
		if (ih->opcode == FUSE_FORGET || ih->opcode == FUSE_BATCH_FORGET ||
		    ih->opcode == FUSE_INTERRUPT)
			continue;
		atomic_fetch_add(&served_dev, 1);
		size_t a0 = arg0_size(ih->opcode);
		buf[r < (ssize_t)sizeof(buf) ? r : r - 1] = 0;
		int n = handle(ih, (char *)(ih + 1), (char *)(ih + 1) + a0, out + 16);
		if (n == NO_REPLY)
			continue;
		struct fuse_out_header *oh = (void *)out;
		*oh = (struct fuse_out_header){16 + (n > 0 ? n : 0), n < 0 ? n : 0, ih->unique};
		if (write(devfd, out, oh->len) < 0 && errno != ENOENT)
			fprintf(stderr, "spike[%d]: reply: %s\n", getpid(), strerror(errno));
	}
}

static volatile sig_atomic_t go;
static void on_usr2(int sig) {
	if (closing)
		return;
	closing = 1;
	for (int i = 0; i < nr_queues && i < 64; i++)
		syscall(SYS_tgkill, getpid(), qtids[i], sig);
}
static void on_usr1(int s) { (void)s; go = 1; }

static int possible_cpus(void) {
	int a = 0, b = 0;
	FILE *f = fopen("/sys/devices/system/cpu/possible", "r");
	if (!f || fscanf(f, "%d-%d", &a, &b) < 1)
		return 1;
	fclose(f);
	return (b > a ? b : a) + 1;
}

static void *prime_cpu(void *arg) {
	char **a = arg;
	int cpu = (int)(intptr_t)a[1];
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	// STATFS: takes no inode lock (a LOOKUP in the root would wait behind a
	// stranded LOOKUP holding the root's lock, without FUSE_PARALLEL_DIROPS)
	struct statfs sf;
	int r = statfs(a[0], &sf);
	fprintf(stderr, "spike[%d]: primed queue %d (%s)\n", getpid(), cpu,
		r ? strerror(errno) : "answered");
	return NULL;
}

// After the owner died: RESEND what sat on /dev/fuse, register a ring, prime
// every queue with one request from its CPU, so a commit pulls whatever was
// stranded there, then serve.
static _Noreturn void successor_run(const char *mnt) {
	successor = 1;
	struct fuse_out_header n = {16, SPIKE_NOTIFY_RESEND, 0};
	if (write(devfd, &n, sizeof(n)) < 0)
		fprintf(stderr, "spike[%d]: NOTIFY_RESEND: %s\n", getpid(), strerror(errno));
	else
		fprintf(stderr, "spike[%d]: successor sent NOTIFY_RESEND\n", getpid());
	if (use_ring) {
		start_ring();
		fprintf(stderr, "spike[%d]: successor registered its ring\n", getpid());
		if (prime) {
			pthread_t t[64];
			char *a[64][2];
			for (int i = 0; i < nr_queues && i < 64; i++) {
				a[i][0] = (char *)mnt;
				a[i][1] = (char *)(intptr_t)i;
				pthread_create(&t[i], NULL, prime_cpu, a[i]);
			}
			for (int i = 0; i < nr_queues && i < 64; i++)
				pthread_join(t[i], NULL);
		}
	}
	printf("successor-ready\n");
	fflush(stdout);
	dev_loop(0);
	exit(0);
}

static int serve(const char *mnt, const char *mode, int handover) {
	use_ring = !strcmp(mode, "ring");
	nr_queues = possible_cpus();
	if (adopt) {
		size_t len = 4096 + (size_t)2 * nr_queues * ENTS_PER_QUEUE * SLOT;
		memfd = memfd_create("uring_spike_ring", 0);
		if (memfd < 0 || ftruncate(memfd, len))
			die("memfd", errno);
		shm = mmap(SHM_ADDR, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED_NOREPLACE, memfd, 0);
		if (shm != SHM_ADDR)
			die("mmap at the fixed address", errno);
		inflight = (volatile uint32_t *)shm;
	}
	FILE *pf = fopen(PASS_FILE, "w"); // on tmpfs: stacking depth 1
	if (pf) {
		fprintf(pf, "backing file of pid %d, read without a READ request\n", getpid());
		fclose(pf);
	}
	devfd = open("/dev/fuse", O_RDWR | O_CLOEXEC);
	if (devfd < 0)
		die("open /dev/fuse", errno);
	char opts[128];
	snprintf(opts, sizeof(opts), "fd=%d,rootmode=40000,user_id=0,group_id=0", devfd);
	if (mount("uring_spike", mnt, "fuse.uring_spike", MS_NOSUID | MS_NODEV, opts))
		die("mount", errno);
	if (handover) {
		pid_t c = fork();
		if (c == 0) { // the successor: same /dev/fuse file, waits for its turn
			signal(SIGUSR1, on_usr1);
			while (!go)
				pause();
			if (adopt) { // a new program image, as an upgrade would be
				char d[16], m[16];
				fcntl(devfd, F_SETFD, 0);
				snprintf(d, sizeof(d), "%d", devfd);
				snprintf(m, sizeof(m), "%d", memfd);
				execl("/proc/self/exe", "uring_spike", "successor", mnt, mode, d, m,
				      prime ? "prime" : "noprime", (char *)NULL);
				die("exec", errno);
			}
			successor_run(mnt);
		}
		printf("successor=%d\n", c);
		fflush(stdout);
	}
	struct sigaction sa = {.sa_handler = on_usr2}; // no SA_RESTART: wake the waits
	sigaction(SIGUSR2, &sa, NULL);
	dev_loop(use_ring);
	return 0;
}

// The exec'd successor of "handover-adopt": maps the passed memfd at the
// address the owner used, then takes over.
static int successor_main(char **argv) {
	use_ring = !strcmp(argv[3], "ring");
	nr_queues = possible_cpus();
	devfd = atoi(argv[4]);
	memfd = atoi(argv[5]);
	prime = !strcmp(argv[6], "prime");
	adopt = 1;
	size_t len = 4096 + (size_t)2 * nr_queues * ENTS_PER_QUEUE * SLOT;
	shm = mmap(SHM_ADDR, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED_NOREPLACE, memfd, 0);
	if (shm != SHM_ADDR)
		die("successor: mmap at the owner's address", errno);
	inflight = (volatile uint32_t *)shm;
	fprintf(stderr, "spike[%d]: exec'd successor mapped the ring memory at %p\n", getpid(), shm);
	successor_run(argv[2]);
	return 0;
}

static double now_us(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b) {
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

// fstat() with attr_timeout 0 is one GETATTR round trip; median of 50 batches.
static int bench(const char *path, long n) {
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		die(path, errno);
	struct stat st;
	double per[50];
	for (int b = 0; b < 50; b++) {
		double t0 = now_us();
		for (long i = 0; i < n / 50; i++)
			if (fstat(fd, &st))
				die("fstat", errno);
		per[b] = (now_us() - t0) / (n / 50);
	}
	qsort(per, 50, sizeof(double), cmp);
	printf("fstat %s: median %.2f us, p10 %.2f, p90 %.2f (50 batches of %ld)\n", path,
	       per[25], per[5], per[45], n / 50);
	return 0;
}

int main(int argc, char **argv) {
	if (argc >= 4 && !strcmp(argv[1], "serve"))
	{
		adopt = argc > 4 && !strncmp(argv[4], "handover-adopt", 14);
		prime = adopt && strcmp(argv[4], "handover-adopt-noprime");
		return serve(argv[2], argv[3], argc > 4 && !strncmp(argv[4], "handover", 8));
	}
	if (argc == 7 && !strcmp(argv[1], "successor"))
		return successor_main(argv);
	if (argc == 4 && !strcmp(argv[1], "bench"))
		return bench(argv[2], atol(argv[3]));
	fprintf(stderr, "usage: %s serve MNT ring|classic [handover] | bench FILE N\n", argv[0]);
	return 2;
}
