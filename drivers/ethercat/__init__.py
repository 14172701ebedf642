"""EtherCAT: CiA 402 drives over CoE through SOEM (pysoem): the ``ethercat`` backend (:mod:`.driver`)."""
