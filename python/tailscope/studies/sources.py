"""The reference documents the studies compare with, and the words each reference check rests on.

One place for every quotation: each `Source` names the document, its section or figure, and the
sentence or numbers quoted verbatim (fragments of one passage joined by " … "; the NTUA thesis is in
Greek, so its quotations carry a translation). The documents are not in the repository; the issue
that re-derived the checks (issue 28) read them from `../shared/seeds/` (SEED_FILES names each
document's file there), and tests/unit/test_reference_checks.py checks every quotation against
those files when they are present.
"""

from __future__ import annotations

from tailscope.report.blocks import Source

CAPSTONE = "DeathStarBench capstone report (Bandi, UCSC 2023)"
ARTICLE = "“Not all Async is Created Equal” (Mahdy, 2019)"
NTUA = "NTUA thesis on microservice performance (Sfakiotakis, 2023)"
BALLERINA = "Ballerina thread-count article (Jayasinghe, 2019)"
ECHO_THESIS = "echo-server thesis (Pasichnyk, UCU 2022)"

# Each document's file among the seeds (../shared/seeds/NNN_*.txt).
SEED_FILES = {CAPSTONE: "000_", ARTICLE: "001_", NTUA: "002_", BALLERINA: "003_", ECHO_THESIS: "004_"}

# ---- the capstone report ----------------------------------------------------------------------

CAPSTONE_LOAD = "All the tests we ran till now are around 70-80% of the system capacity."

CAPSTONE_FIGURE3 = Source(
    CAPSTONE,
    "§3, Figure 3 (compose-post latency CDF)",
    "The median latency for the compose post workloads on the social network application is approximately "
    "10ms and the latencies for the workload ranging from 50th to 90th percentile increases by a factor of 5. "
    "However, the system experiences a very high tail latency ranging from 50ms to 200ms.",
)
CAPSTONE_FIGURE6 = Source(
    CAPSTONE,
    "§3.1.2, Figure 6 (trace timeline); load: §3.1.5",
    "there is a delay of around 8 – 23 ms before the asynchronous operations are scheduled … it takes another "
    "37ms for these async and deferred operations to be scheduled … a considerable proportion of the overall "
    f"latency (at least 45ms) is caused by scheduling, join and queuing delays … {CAPSTONE_LOAD}",
)
CAPSTONE_FIGURE8 = Source(
    CAPSTONE,
    "§3.1.4, Figure 8 (delays of every async call); load: §3.1.5",
    "70% of requests have very low delays close to 0ms, but this figure changes rapidly for the 90th percentile "
    "of requests, where the delay is amplified by 5 times. Furthermore, the tail latency shows a significant "
    "variation ranging from 10-40ms, representing at least 2-8 times increment over the 90th percentile of "
    f"requests. … {CAPSTONE_LOAD}",
)
CAPSTONE_FIGURE9 = Source(
    CAPSTONE,
    "§3.1.5, Figure 9 (contention)",
    "varying the degree of concurrency of the request load in the wrk2 benchmark suite by tuning the connections "
    "parameter … As we increased the number of open connections from 20 to 80, the tail latencies increased "
    "three folds and quadrupled when increased to 100.",
)
CAPSTONE_SPLIT = Source(
    CAPSTONE,
    "§3.1.5 (service isolation)",
    "we ran deathstarbench in a swarm mode where we split the services onto 3 different nodes … With this "
    "deployment, we did observe a huge drop in the overall latencies.",
)
CAPSTONE_FIGURE12 = Source(
    CAPSTONE,
    "§3.3.2, Figure 12 (launch policies)",
    "All these experiments are run at 75% of the threshold to avoid potential performance degradation due to "
    "contention. … it is clear that std::thread has better performance over std::async using launch::async "
    "mode. … std::async has higher scheduling and join delays because of the shared state management of the "
    "promises and future objects.",
)
CAPSTONE_FIGURES13_14 = Source(
    CAPSTONE,
    "§3.3.3, Figures 13 and 14 (promise type)",
    "there is a strict correlation between the promise size and the Scheduling and Join delays. … how "
    "increasing the size of promise object increases the overall delay as expected. It's much more strikingly "
    "clear between the scenario where the asynchronous function doesn't return any value compared to when it "
    "returns a 10k buffer.",
)

# ---- the "not all async is created equal" article ---------------------------------------------

ARTICLE_SHAPE = Source(
    ARTICLE,
    "“Lay of the Land” to “What it Takes to be Actually Async”",
    "The number of threads in the thread pool is set to a constant number at runtime - usually equal to the "
    "number of logical cores in the server, as is usually recommended. … the app was capable of handling 40k "
    "QPS per machine. … we now go from 40k QPS all the way down to 8k QPS! … throughput under high concurrency "
    "levels could now reach about 30k QPS!",
)

# ---- the Ballerina thread-count article -------------------------------------------------------

BALLERINA_TAIL_CPU = Source(
    BALLERINA,
    "“The impact of tail latencies” (message transformation, 10 vs 100 threads); “The Impact of average "
    "latency and throughput”",
    "as the workload becomes more and more CPU bound, having a large number of threads, increases the "
    "probability of long-tail latencies from occurring (indicated by higher latency percentile values). We note "
    "that 100 threads have higher 99% percentile values compared to that of 10 threads. … The maximum "
    "improvement in TPS is about 7%.",
)
BALLERINA_TAIL_IO = Source(
    BALLERINA,
    "“The impact of tail latencies” (simple pass-through)",
    "For the I/O bound use cases (i.e. simple pass-through) we did not notice a significant degradation on the "
    "tail latencies with the increasing numbers of threads.",
)
BALLERINA_LOAD = Source(
    BALLERINA,
    "“The impact of load average” (message transformation)",
    "when using a large number of threads, there is a significant increase in the load average in particular "
    "for workloads that have both I/O and CPU operations. … 4 threads: run-queue length = 8, load average = 5 "
    "100 threads: run-queue length 41, load average = 37",
)

# ---- the echo-server thesis, chapter 5 --------------------------------------------------------

ECHO_LOW = Source(
    ECHO_THESIS,
    "§5.1 (low region, below 100 connections)",
    "For the low connection numbers region, the latency is quite similar among all implementations, so we will "
    "focus on the throughput, CPU, and memory utilization. So the first place takes the synchronous "
    "multithreaded implementation (Section 4.1.1), which shows the best throughput results on average.",
)
ECHO_MIDDLE = Source(
    ECHO_THESIS,
    "§5.1 (middle region); §4.1.5",
    "Middle region – expected connection number is between 100 and 2000, … The best choice in this range will "
    "be the asynchronous threaded version (Section 4.1.5), with the best throughput results. … The thread count "
    "is adjusted to the logical cores number of the server host used in the tests.",
)
ECHO_HIGH = Source(
    ECHO_THESIS,
    "§5.1 (high region)",
    "High region – expected connection number is above 2000. … The finest choice here for all parameters is "
    "the hybrid synchronous single-threaded implementation (Section 4.1.2). It has the best throughput, latency "
    "stability, and efficient CPU and memory usage.",
)

# ---- the NTUA thesis (Greek) --------------------------------------------------------------------

NTUA_KNAPSACK = Source(
    NTUA,
    "§6.3.5, Figures 6.31/6.32, Table 6.3; load: §6.2.2",
    "Οι περιπτώσεις του knapsack και του random2 φαίνεται να δίνουν τα καλύτερα αποτελέσματα και σε latency και "
    "σε tail latency, έχοντας λιγότερο από 30 ms latency. … να ξεπεράσει κάποιο χρονικό όριο που είχε τεθεί, το "
    "οποίο ήταν τα 50ms",
    "the knapsack and random2 placements give the best latency and tail latency, under 30 ms; … the request "
    "rate was raised until the response time exceeded a limit, which was 50 ms",
)
NTUA_LATENCY_PLACEMENTS = Source(
    NTUA,
    "§5.4; §6.3.5, Table 6.3",
    "Συγκεκριμένα τοποθετούνται μαζί αυτά που δείχνουν ευαισθησία σε διαφορετικούς πόρους … Αντιθέτως οι "
    "περιπτώσεις random1, latency1, latency2, latency3 φαίνονται να μην βελτιστοποιούν το baseline σενάριο",
    "services sensitive to different resources are placed together … random1, latency1, latency2 and latency3 "
    "do not improve on the baseline (colocated) placement",
)
NTUA_IPC_VS_LATENCY = Source(
    NTUA,
    "§6.3.4",
    "Σε αντίθεση με το IPC το οποίο και έπιανε τις χαμηλότερες τιμές του όταν βρισκόταν ο κόμβος υπό την πίεση "
    "του memory bandwidth stress test, το tail latency έχει από τις χαμηλότερες τιμές ακριβώς όταν εισάγουμε "
    "αυτό το stressing microbenchmark.",
    "unlike IPC, which was lowest with the memory-bandwidth stress test on the node, tail latency has some of "
    "its lowest values exactly when that microbenchmark is added",
)

ALL = (
    CAPSTONE_FIGURE3,
    CAPSTONE_FIGURE6,
    CAPSTONE_FIGURE8,
    CAPSTONE_FIGURE9,
    CAPSTONE_SPLIT,
    CAPSTONE_FIGURE12,
    CAPSTONE_FIGURES13_14,
    ARTICLE_SHAPE,
    BALLERINA_TAIL_CPU,
    BALLERINA_TAIL_IO,
    BALLERINA_LOAD,
    ECHO_LOW,
    ECHO_MIDDLE,
    ECHO_HIGH,
    NTUA_KNAPSACK,
    NTUA_LATENCY_PLACEMENTS,
    NTUA_IPC_VS_LATENCY,
)
