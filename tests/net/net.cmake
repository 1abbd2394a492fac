# Several "hosts" made of network namespaces joined by a rate-limited veth pair, Open MPI over
# TCP between them from a hostfile: data parallelism equals one host's run, the ring works
# across them, a killed host ends the job. Needs root: skipped (reported as such) without.
dt_add_cli_test(NAME cli_netns COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/netns.sh MPI TIMEOUT 180)
set_tests_properties(cli_netns PROPERTIES SKIP_RETURN_CODE 77)
