# Smoke tests with real Redis clients: one short bounded run each.

proc find_python_with_redis {} {
    foreach py {/usr/bin/python3 python3} {
        if {[auto_execok $py] eq ""} continue
        if {[lindex [run_bounded 20 $py -c "import redis"] 0] == 0} { return $py }
    }
    return ""
}

start_server {} {
    test "redis-cli: SET, GET, INFO, write-once error" {
        if {[auto_execok redis-cli] eq ""} { skip "redis-cli not installed" }
        set cli [list redis-cli -h 127.0.0.1 -p [srv port]]
        assert_equal {0 OK} [run_bounded 20 {*}$cli set cli:k hello]
        assert_equal {0 hello} [run_bounded 20 {*}$cli get cli:k]
        lassign [run_bounded 20 {*}$cli set cli:k again] code out
        assert_match "*EXISTS*" $out
        lassign [run_bounded 20 {*}$cli info] code out
        assert_equal 0 $code
        assert_match "*# Server*" $out
    }

    test "redis-cli --pipe" {
        if {[auto_execok redis-cli] eq ""} { skip "redis-cli not installed" }
        set f [file join [srv::log_dir] cli-pipe-[srv port].txt]
        set fh [open $f w]
        fconfigure $fh -translation binary
        for {set i 0} {$i < 1000} {incr i} {
            puts -nonewline $fh "*3\r\n\$3\r\nSET\r\n\$[string length clipipe:$i]\r\nclipipe:$i\r\n\$1\r\nv\r\n"
        }
        close $fh
        lassign [run_bounded 30 sh -c "redis-cli -h 127.0.0.1 -p [srv port] --pipe < $f"] code out
        file delete $f
        assert_equal 0 $code $out
        assert_match "*errors: 0, replies: 1000*" $out
        assert_equal v [r get clipipe:999]
    }

    test "redis-benchmark set,get completes with non-zero rates" {
        if {[auto_execok redis-benchmark] eq ""} { skip "redis-benchmark not installed" }
        lassign [run_bounded 60 redis-benchmark -h 127.0.0.1 -p [srv port] \
                     -t set,get -n 20000 -r 100000 -P 16 -q] code out
        assert_equal 0 $code $out
        # Random keys repeat, so some SETs hit -EXISTS; rates must still show.
        foreach t {SET GET} {
            if {![regexp "$t: (\[0-9.\]+) requests per second" $out -> rate]} {
                tt::fail "no $t rate in: $out"
            }
            assert {$rate > 0}
        }
        assert_equal PONG [r ping]
    }

    test "python3-redis: set/get/mget/delete/pipeline and write-once" {
        set py [find_python_with_redis]
        if {$py eq ""} { skip "python3 redis module not installed" }
        set script [file join $::tt_dir helpers redis_py_smoke.py]
        lassign [run_bounded 60 $py $script [srv port]] code out
        assert_equal 0 $code $out
        assert_equal [join {
            "set True" "get True" "mget True" "write-once True" "unchanged True"
            "nx None" "pipeline True" "delete 2" "exists 0"} \n] $out
    }
}

start_server {} {
    test "python3-redis: default (transactional) pipeline through MULTI/EXEC" {
        set py [find_python_with_redis]
        if {$py eq ""} { skip "python3 redis module not installed" }
        set script [file join $::tt_dir helpers redis_py_multi.py]
        lassign [run_bounded 60 $py $script [srv port] tx] code out
        assert_equal 0 $code $out
        assert {![string match "*not ok*" $out]} $out
        assert_equal 6 [regexp -all -line {^ok - } $out] $out
    }
}

start_server {} {
    test "redis-cli --scan and --bigkeys" {
        if {[auto_execok redis-cli] eq ""} { skip "redis-cli not installed" }
        for {set i 0} {$i < 30} {incr i} { r set bk:$i [string repeat x [expr {$i + 1}]] }
        lassign [run_bounded 30 redis-cli -p [srv port] --scan --pattern bk:*] code out
        assert_equal 0 $code $out
        assert_equal 30 [llength [lsort -unique [split [string trim $out] \n]]] $out
        lassign [run_bounded 30 redis-cli -p [srv port] --bigkeys] code out
        assert_equal 0 $code $out
        assert_match {*Biggest string found*bk:29*has 30 bytes*} $out
        assert_match {*30 strings with 465 bytes*} $out
    }
}
