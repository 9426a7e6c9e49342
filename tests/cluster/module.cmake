# The cluster component against a real etcd (tests/cluster/etcd_process.h starts one).
tokimq_test_module(cluster DEPS tokimq::cluster)
