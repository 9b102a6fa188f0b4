# Pipelines are answered in order.
start_server {} {
    test "10000 pipelined commands answered in order" {
        set c [new_client [scaled_ms 30000]]
        for {set i 0} {$i < 10000} {incr i} {
            switch [expr {$i % 4}] {
                0 { $c send set pipe:$i v$i }
                1 { $c send get pipe:[expr {$i - 1}] }
                2 { $c send echo e$i }
                3 { $c send exists pipe:[expr {$i - 3}] pipe:$i }
            }
        }
        $c flush
        for {set i 0} {$i < 10000} {incr i} {
            set got [$c read]
            switch [expr {$i % 4}] {
                0 { set want OK }
                1 { set want v[expr {$i - 1}] }
                2 { set want e$i }
                3 { set want 1 }
            }
            if {$got ne $want} { assert_equal $want $got "(reply $i)" }
        }
        $c close
    }

    test "pipeline of writes mixed with a protocol error stops at the error" {
        set c [new_client]
        $c write "*1\r\n\$4\r\nPING\r\n*1\r\n\$4\r\nPINGxx\r\n*1\r\n\$4\r\nPING\r\n"
        assert_equal PONG [$c read]
        assert_error "ERR Protocol error*" {$c read}
        assert_equal 1 [$c wait_closed]
        $c close
        assert_equal PONG [r ping]
    }
}
